"""spec_refs.py: following `$ref` in the parsed openapi.yaml, for the
Python checks that walk its schemas (the contract checks, and the
response check the integration tests call)."""


def deref(doc, node):
    """`node`, or what its `$ref` (a local JSON pointer, ~0 and ~1 escaped)
    names, followed until it is no reference."""
    while isinstance(node, dict) and "$ref" in node:
        target = doc
        for part in node["$ref"][2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node

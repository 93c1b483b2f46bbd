#!/usr/bin/env python3
"""check_response.py SPEC METHOD PATH STATUS MEDIA BODYFILE: validates a
response body the server sent against the schema the spec gives that
operation's response (JSON Schema 2020-12, the dialect of OpenAPI 3.1),
with every local $ref resolved in the spec.  A `oneOf` must match exactly
one alternative; the alternatives matched are printed.  Exits 0 when the
body is valid, 1 when not (with the reasons), 2 on bad arguments, 77
(meson's "skipped") when PyYAML or jsonschema is not installed."""
import json
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from spec_refs import deref  # noqa: E402

try:
    import yaml
    import jsonschema
except ImportError:
    print("PyYAML or jsonschema not installed: skipped")
    sys.exit(77)


def main():
    if len(sys.argv) != 7:
        print(__doc__)
        return 2
    spec, method, path, status, media, body_file = sys.argv[1:]
    with open(spec, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    with open(body_file, encoding="utf-8") as f:
        body = json.load(f)
    try:
        op = doc["paths"][path][method.lower()]
        response = deref(doc, op["responses"][status])
        schema = response["content"][media]["schema"]
    except (KeyError, TypeError):
        print(f"the spec has no {media} schema for {status} of {method} {path}")
        return 2
    # Local refs ("#/components/...") resolve against the whole spec.
    root = dict(doc)
    root.update(schema)
    validator = jsonschema.Draft202012Validator(root)
    top = deref(doc, schema)
    for key in ("oneOf", "anyOf"):
        for i, alt in enumerate(top.get(key, [])):
            ok = jsonschema.Draft202012Validator(dict(doc, **alt)).is_valid(body)
            print(f"{key}[{i}] {alt.get('$ref', '(inline)')}: {'matches' if ok else 'no match'}")
    errors = sorted(validator.iter_errors(body), key=lambda e: list(e.path))
    for e in errors:
        print(f"invalid at /{'/'.join(str(p) for p in e.path)}: {e.message[:300]}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

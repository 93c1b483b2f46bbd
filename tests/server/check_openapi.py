#!/usr/bin/env python3
"""check_openapi.py SPEC: parses openapi/openapi.yaml as YAML and checks
what a line-based reader cannot: the document is one mapping of OpenAPI
3.1.0, every local $ref resolves, operationIds are unique, every tag an
operation uses is declared with a description, every operation documents a
4XX answer, and every component is referenced.  The last three are rules of
the linters .ci/lint-openapi runs (redocly's recommended-strict, spectral's
spectral:oas), checked here too so that the suite holds them where node is
absent.  Exits 77 (meson's "skipped") when PyYAML is not installed."""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from check_report import finish, module_or_skip  # noqa: E402

yaml = module_or_skip("yaml", "PyYAML")

METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


def refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield v
            else:
                yield from refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from refs(v)


def resolve(doc, ref):
    if not ref.startswith("#/"):
        return False
    node = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    errors = []
    if not isinstance(doc, dict) or doc.get("openapi") != "3.1.0":
        errors.append("not an OpenAPI 3.1.0 document")
        doc = {}
    for ref in sorted(set(refs(doc))):
        if not resolve(doc, ref):
            errors.append(f"unresolved $ref {ref}")
    seen = {}
    for path, item in (doc.get("paths") or {}).items():
        for method, op in item.items():
            if method not in METHODS:
                continue
            oid = op.get("operationId")
            if not oid:
                errors.append(f"{method.upper()} {path}: no operationId")
            elif oid in seen:
                errors.append(f"operationId {oid} used by {seen[oid]} and {method.upper()} {path}")
            else:
                seen[oid] = f"{method.upper()} {path}"
    declared = {}
    for t in doc.get("tags") or []:
        name = t.get("name") if isinstance(t, dict) else None
        if not name or name in declared:
            errors.append(f"tag {name!r} declared without a name or twice")
        elif not str(t.get("description") or "").strip():
            errors.append(f"tag {name} declared without a description")
        declared[name] = True
    for path, item in (doc.get("paths") or {}).items():
        for method, op in item.items():
            if method not in METHODS:
                continue
            for tag in op.get("tags") or []:
                if tag not in declared:
                    errors.append(f"{method.upper()} {path}: tag {tag} is not declared under tags")
            codes = [str(c) for c in (op.get("responses") or {})]
            if not any(c.startswith("4") for c in codes):
                errors.append(f"{method.upper()} {path}: no 4XX response")
    used = set(refs(doc))
    for kind, entries in (doc.get("components") or {}).items():
        if kind == "securitySchemes":
            continue  # named by security requirements, not by $ref
        for name in entries or {}:
            if f"#/components/{kind}/{name}" not in used:
                errors.append(f"components/{kind}/{name} is never referenced")
    return finish(errors, f"{len(seen)} operations, {len(errors)} errors")


if __name__ == "__main__":
    sys.exit(main())

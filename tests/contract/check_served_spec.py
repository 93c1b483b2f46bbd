#!/usr/bin/env python3
"""check_served_spec.py SPEC: the dataset listing's `archived` query
parameter as openapi.yaml declares it, against a running server.  Each
value of its enum is answered 200 (`true` lists the archived dataset,
`false` and no value do not, and the enum's default answers as no value
does); a value outside the enum is refused with a 4XX the operation
documents, as problem+json naming `archived`, and changes nothing.

Then every operation of the spec against the query parameters it declares:
a parameter it does not declare is refused 400 naming it (the dashboard's
page and assets take any), and none it declares is refused as unknown.
Exits 77 when PyYAML is not installed."""
import os
import sys
import urllib.parse

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from check_report import finish, module_or_skip  # noqa: E402
from spec_refs import deref  # noqa: E402
from dpgate_server import Server  # noqa: E402

yaml = module_or_skip("yaml", "PyYAML")

OUTSIDE_ENUM = ["yes", "1", "0", "TRUE", "True", "", "true%20", "false,true"]


UNDECLARED = "zz_undeclared"
TAKE_ANY = {"/", "/assets/{name}"}  # pages, where cache-busting parameters are customary
PATH_VALUES = {"{id}": "probe", "{rid}": "r1", "{sid}": "s1", "{name}": "dashboard.js"}


def declared_query(doc, item, op):
    params = [deref(doc, p) for p in (item.get("parameters") or []) + (op.get("parameters") or [])]
    return sorted(p["name"] for p in params if p.get("in") == "query")


def refused_as_undeclared(st, body, name):
    return st == 400 and isinstance(body, dict) and body.get("field") == name and \
        "not a query parameter" in str(body.get("detail"))


def check_query_names(doc, srv, errors):
    """Each operation with an undeclared parameter, then with each declared
    one; the dataset `probe` does not exist, so nothing declared changes
    anything either.  Returns how many operations were checked."""
    checked = 0
    for path, item in doc["paths"].items():
        target = path
        for k, v in PATH_VALUES.items():
            target = target.replace(k, v)
        for method, op in item.items():
            if method not in ("get", "head", "post", "put", "patch", "delete"):
                continue
            m = method.upper()
            st, body = srv.call(m, f"{target}?{UNDECLARED}=1", key=srv.key)
            if path in TAKE_ANY:
                if st == 400:
                    errors.append(f"{m} {path} refused an undeclared parameter: {body}")
            elif m == "HEAD" and st != 400:
                errors.append(f"HEAD {path}?{UNDECLARED}=1: status {st}, expected 400")
            elif m != "HEAD" and not refused_as_undeclared(st, body, UNDECLARED):
                errors.append(f"{m} {path}?{UNDECLARED}=1: {st} {body}, expected 400 naming it")
            # A HEAD answer has no body to tell why it was refused; its GET
            # is the same route.
            for name in declared_query(doc, item, op) if m != "HEAD" else []:
                st, body = srv.call(m, f"{target}?{name}=1", key=srv.key)
                if refused_as_undeclared(st, body, name):
                    errors.append(f"{m} {path}?{name}=1 is refused though declared: {st} {body}")
            checked += 1
    return checked


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    op = doc["paths"]["/v1/datasets"]["get"]
    params = [deref(doc, p) for p in op.get("parameters") or []]
    archived = [p for p in params if p.get("in") == "query" and p.get("name") == "archived"]
    if len(archived) != 1:
        print("GET /v1/datasets declares no `archived` query parameter")
        return 1
    schema = archived[0]["schema"]
    enum = schema.get("enum") or []
    documented = {str(c) for c in op["responses"]}
    errors = []

    with Server() as srv:
        for ds in ("kept", "gone"):
            st, _ = srv.call("POST", "/v1/datasets",
                             {"id": ds, "budget": {"epsilon": 1, "delta": 0}, "accountant": "basic"},
                             srv.key)
            assert st == 201, st
        st, _ = srv.call("DELETE", "/v1/datasets/gone", key=srv.key)
        assert st == 200, st

        def listing(query):
            st, body = srv.call("GET", "/v1/datasets" + query, key=srv.key)
            ids = sorted(d["id"] for d in body["datasets"]) if st == 200 else None
            return st, body, ids

        st, _, plain = listing("")
        if (st, plain) != (200, ["kept"]):
            errors.append(f"no archived parameter: {st} {plain}, expected 200 ['kept']")
        if sorted(enum) != ["false", "true"]:
            errors.append(f"archived's enum is {enum}, expected true and false")
        for value in enum:
            st, body, ids = listing("?archived=" + value)
            want = ["gone", "kept"] if value == "true" else ["kept"]
            if (st, ids) != (200, want):
                errors.append(f"archived={value}: {st} {ids or body}, expected 200 {want}")
        if "default" in schema:
            st, _, ids = listing("?archived=" + urllib.parse.quote(str(schema["default"])))
            if (st, ids) != (200, plain):
                errors.append(f"archived={schema['default']} (the default): {ids}, no value: {plain}")
        for value in OUTSIDE_ENUM:
            st, body, _ = listing("?archived=" + value)
            if not (400 <= st < 500 and str(st) in documented):
                errors.append(f"archived={value!r} (outside the enum): status {st}, "
                              f"expected a 4XX of {sorted(documented)}")
            elif not isinstance(body, dict) or body.get("field") != "archived":
                errors.append(f"archived={value!r}: the problem does not name archived: {body}")
        operations = check_query_names(doc, srv, errors)
        st, _, after = listing("")
        if (st, after) != (200, plain):
            errors.append(f"the refused listings changed what is listed: {after}")
    return finish(errors, f"archived: {len(enum)} enum values, {len(OUTSIDE_ENUM)} outside it; "
                  f"query parameters of {operations} operations; {len(errors)} errors")


if __name__ == "__main__":
    sys.exit(main())

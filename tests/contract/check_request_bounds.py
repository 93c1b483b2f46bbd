#!/usr/bin/env python3
"""check_request_bounds.py SPEC: every bound the spec gives a scalar field
of a JSON request body, against a running server.

For each operation below, a body the server takes (the base) is sent with
one field at a time set just outside a bound its schema declares (minimum,
maximum, either exclusive end, maxLength, minLength, enum): the server
must refuse it with 400 as problem+json whose `field` points at that
field; likewise an array the base holds, one item short of or past the
counts its schema allows.  A field whose schema declares no maximum is also sent a huge value
(1e300, or 2^53 for an integer): a refusal of that at the field means the
server has a maximum the spec does not state.  Then each bound of each GET's
query parameters, just outside, is refused with 400 naming the parameter.
The refused requests change nothing: the datasets' budget summaries are
read before and after.  An operation of the spec whose JSON body has a
bound but no base body here is an error, so a new one is not skipped.
Exits 77 when PyYAML is not installed."""
import copy
import os
import re
import sys
import time
import urllib.parse

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from check_report import finish, module_or_skip  # noqa: E402
from spec_refs import deref  # noqa: E402
from dpgate_server import Server, time_scale  # noqa: E402

yaml = module_or_skip("yaml", "PyYAML")

ALL = ("*",)
NOISE_PARAMETERS = ("epsilon", "noise_multiplier", "scale", "sigma")
# Where the operation's text gives another status than 400: predict's
# rows past 10000 are one of its three size limits, "422 past any".
ARRAY_STATUS = {("POST", "/v1/jobs/{id}/predict", "rows", "maxItems"): 422}
# What the setup makes for the operations' paths: a PATE session, a job.
RUN_IDS = {}
SESSION = {"aggregator": "confident_gnmax", "num_teachers": 10, "num_classes": 3,
           "sigma1": 2, "sigma2": 1, "threshold": 3}
# The {id} of a GET's path for its query parameters, a dataset otherwise
# (a job's is set once its job has run).
QUERY_IDS = {"/v1/datasets/{id}/data": "table"}
TRAIN_CSV = "x,y\n" + "".join(f"{i % 7},{'ab'[i % 2]}\n" for i in range(40))
TRAIN_JOB = {"trainer": "dpsgd", "params": {"model": "logreg", "label": "y", "classes": ["a", "b"],
                                            "epochs": 1, "lot_size": 10}}
LAPLACE = {"type": "laplace", "noise_multiplier": 1000}
GAUSSIAN = {"type": "gaussian", "noise_multiplier": 1000}

# (method, path, base body, fields the huge value is not sent to).  A
# field is left out where its maximum is a bound of the data or of another
# field (the text of its schema says so).  A mechanism's fields are the
# union of every mechanism's (MechanismRequest), so a huge value is refused
# for reasons of the one named (a field it does not take, a noise scale
# too small for the grid): none is sent there.
OPERATIONS = [
    ("POST", "/v1/accountant/epsilon", {"event": LAPLACE, "delta": 1e-5}, ()),
    ("POST", "/v1/accountant/delta", {"event": LAPLACE, "epsilon": 1}, ()),
    ("POST", "/v1/accountant/calibrate",
     {"template": {"type": "gaussian", "noise_multiplier": None}, "epsilon": 1, "delta": 1e-5},
     ()),
    ("POST", "/v1/accountant/compare", {"event": GAUSSIAN, "delta": 1e-5}, ()),
    ("POST", "/v1/accountant/rdp", {"event": GAUSSIAN, "orders": [2, 8]}, ()),
    ("POST", "/v1/pate/cost", {"votes": [8, 1, 1], "sigma": 5, "orders": [2, 8]}, ("threshold",)),
    ("POST", "/v1/pate/smooth-sensitivity",
     {"votes": [8, 1, 1], "num_teachers": 10, "sigma": 5, "order": 10, "beta": 0.01},
     ()),
    ("POST", "/v1/label-em/guidance", {"n": 100, "epsilon": 1}, ()),
    ("POST", "/v1/datasets",
     {"id": "probe", "name": "probe", "budget": {"epsilon": 1, "delta": 1e-5}, "accountant": "rdp",
      "neighbor": "add_remove", "privacy_unit": "record"}, ()),
    ("PATCH", "/v1/datasets/rdp", {"name": "renamed", "budget": {"epsilon": 1000, "delta": 1e-5}},
     ()),
    ("POST", "/v1/datasets/rdp/charges", {"event": LAPLACE}, ()),
    ("POST", "/v1/datasets/rdp/reservations", {"event": LAPLACE, "ttl_seconds": 60}, ()),
    ("POST", "/v1/datasets/rdp/dry-run", {"event": LAPLACE}, ()),
    ("POST", "/v1/keys", {"role": "viewer"}, ()),
    ("POST", "/v1/datasets/rdp/mechanisms/laplace",
     {"value": 1, "sensitivity": 1, "epsilon": 0.5}, ALL),
    ("POST", "/v1/datasets/basic/mechanisms/gaussian",
     {"value": 1, "sensitivity": 1, "epsilon": 0.5, "delta": 1e-6, "ledger_delta": 1e-6}, ALL),
    ("POST", "/v1/datasets/replace/mechanisms/randomized_response",
     {"value": 1, "epsilon": 0.5, "num_buckets": 4}, ALL),
    ("POST", "/v1/datasets/rdp/mechanisms/laplace",
     {"values": [1, 2], "sensitivity": 1, "epsilon": 0.5}, ALL),
    # Each noise parameter alone: beside another it is refused as a second.
    ("POST", "/v1/datasets/rdp/mechanisms/laplace", {"value": 1, "sensitivity": 1, "scale": 2}, ALL),
    ("POST", "/v1/datasets/rdp/mechanisms/laplace",
     {"value": 1, "sensitivity": 1, "noise_multiplier": 2}, ALL),
    ("POST", "/v1/datasets/rdp/mechanisms/gaussian", {"value": 1, "sensitivity": 1, "sigma": 2}, ALL),
    ("POST", "/v1/datasets/rdp/mechanisms/discrete_laplace",
     {"value": 3, "sensitivity": 1, "epsilon": 0.5}, ALL),
    ("POST", "/v1/datasets/rdp/mechanisms/discrete_gaussian",
     {"value": 3, "sensitivity": 1, "noise_multiplier": 2}, ALL),
    ("POST", "/v1/datasets/rdp/mechanisms/exponential",
     {"scores": [1, 2, 3], "sensitivity": 1, "epsilon": 0.5}, ALL),
    ("POST", "/v1/datasets/rdp/mechanisms/permute_and_flip",
     {"scores": [1, 2, 3], "sensitivity": 1, "epsilon": 0.5}, ALL),
    ("POST", "/v1/datasets/rdp/mechanisms/report_noisy_max",
     {"scores": [1, 2, 3], "sensitivity": 1, "noise": "gumbel", "epsilon": 0.5}, ALL),
    ("POST", "/v1/datasets/rdp/mechanisms/report_noisy_max",
     {"scores": [1, 2, 3], "sensitivity": 1, "noise": "gaussian", "sigma": 2}, ALL),
    ("POST", "/v1/datasets/replace/mechanisms/label_em", {"labels": [0, 1, 1], "epsilon": 1}, ALL),
    ("POST", "/v1/datasets/table/queries",
     {"query": "quantile", "column": "x", "lo": 0, "hi": 10, "q": 0.5, "epsilon": 0.5}, ()),
    ("POST", "/v1/datasets/rdp/pate/sessions",
     {"aggregator": "confident_gnmax", "num_teachers": 10, "num_classes": 3,
      "sigma1": 2, "sigma2": 1, "threshold": 3, "orders": [2, 8]}, ("threshold", "gamma")),
    ("POST", "/v1/datasets/rdp/pate/sessions",
     {"aggregator": "lnmax", "num_teachers": 10, "num_classes": 3, "gamma": 0.1}, ("threshold",)),
    ("POST", "/v1/datasets/rdp/pate/sessions/{sid}/release",
     {"beta": 0.01, "sigma": 15, "order": 10, "delta": 1e-5}, ()),
    ("POST", "/v1/datasets/rdp/pate/sessions/{sid}/queries", {"queries": [{"votes": [8, 1, 1]}]},
     ()),
    ("PUT", "/v1/datasets/fm/data", {"builtin": "fashion-mnist"}, ()),
    ("POST", "/v1/jobs/{job}/predict", {"rows": [[3]]}, ()),
    ("POST", "/v1/datasets/fm/jobs",
     {"trainer": "dpsgd", "dry_run": True, "params": {"epochs": 1}}, ()),
]

DATASETS = {
    "rdp": {"id": "rdp", "budget": {"epsilon": 1000, "delta": 1e-5}, "accountant": "rdp"},
    "basic": {"id": "basic", "budget": {"epsilon": 1000, "delta": 1e-5}, "accountant": "basic"},
    "table": {"id": "table", "budget": {"epsilon": 1000, "delta": 1e-5}, "accountant": "basic"},
    "replace": {"id": "replace", "budget": {"epsilon": 1000, "delta": 1e-5}, "accountant": "rdp",
                "neighbor": "replace"},
    "fm": {"id": "fm", "budget": {"epsilon": 1000, "delta": 1e-5}, "accountant": "rdp"},
    "train": {"id": "train", "budget": {"epsilon": 1000, "delta": 1e-5}, "accountant": "rdp"},
}


def concrete(path):
    """The path with the ids made at setup in place of their names."""
    for name, value in RUN_IDS.items():
        path = path.replace(name, value)
    return path


def spec_path(doc, path):
    """The spec's path template that `path` is an instance of."""
    for template in doc["paths"]:
        if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path):
            return template
    raise KeyError(f"no path of the spec matches {path}")


def request_schema(doc, method, path):
    op = doc["paths"][spec_path(doc, path)][method.lower()]
    return deref(doc, op["requestBody"]["content"]["application/json"]["schema"])


def outside_values(s):
    """Values just outside each bound schema `s` declares, with the bound."""
    out = []
    integer = s.get("type") == "integer"
    step = (lambda b: 1) if integer else (lambda b: max(abs(b) * 1e-9, 1e-300))
    if "minimum" in s:
        out.append((s["minimum"] - step(s["minimum"]), f"minimum {s['minimum']}"))
    if "exclusiveMinimum" in s:
        out.append((s["exclusiveMinimum"], f"exclusiveMinimum {s['exclusiveMinimum']}"))
    if "maximum" in s:
        out.append((s["maximum"] + step(s["maximum"]), f"maximum {s['maximum']}"))
    if "exclusiveMaximum" in s:
        out.append((s["exclusiveMaximum"], f"exclusiveMaximum {s['exclusiveMaximum']}"))
    if "maxLength" in s:
        out.append(("a" * (s["maxLength"] + 1), f"maxLength {s['maxLength']}"))
    if s.get("minLength", 0) >= 1:
        out.append(("", f"minLength {s['minLength']}"))
    if "enum" in s and s.get("type") == "string":
        out.append(("zz_none_of_them", "enum"))
    elif "enum" in s:
        out.append((max(s["enum"]) + 1, "enum"))
    return out


def huge_value(s):
    """A value past any maximum the field might have, when the spec states none."""
    if "maximum" in s or "exclusiveMaximum" in s or "enum" in s:
        return None
    if s.get("type") == "integer":
        return 2 ** 53
    if s.get("type") == "number":
        return 1e300
    return None


def refused_at(st, body, pointer, status=400):
    return st == status and isinstance(body, dict) and body.get("field") == pointer


def object_schema(doc, schema, base):
    """The schema's own, or that of its first oneOf variant whose
    properties hold every member of the base."""
    for variant in [schema] + [deref(doc, v) for v in schema.get("oneOf", [])]:
        props = variant.get("properties") or {}
        if props and all(k in props for k in base):
            return variant
    raise KeyError(f"no variant of the schema holds {sorted(base)}")


def scalar(prop):
    """A nullable scalar ("type": [T, "null"]) as its T: null is a value
    apart, and the bounds are T's."""
    kinds = prop.get("type")
    if isinstance(kinds, list) and len(kinds) == 2 and "null" in kinds:
        return dict(prop, type=[k for k in kinds if k != "null"][0])
    return prop


def scalar_fields(doc, method, path, base):
    """(pointer, schema) of each scalar field of the body, and of each
    scalar member of an object field the base holds."""
    schema = object_schema(doc, request_schema(doc, method, path), base)
    for name, prop in (schema.get("properties") or {}).items():
        prop = scalar(deref(doc, prop))
        if prop.get("type") in ("number", "integer", "string"):
            yield (name,), prop
        elif isinstance(base.get(name), dict):
            for member, sub in (prop.get("properties") or {}).items():
                sub = deref(doc, sub)
                if sub.get("type") in ("number", "integer", "string"):
                    yield (name, member), sub


def with_value(base, at, value):
    body = copy.deepcopy(base)
    target = body
    for part in at[:-1]:
        target = target[part]
    target[at[-1]] = value
    return body


def second_noise_parameter(path, base, at):
    """A mechanism takes one noise parameter: another beside the base's is
    refused as a second, whatever its value."""
    return "/mechanisms/" in path and at[-1] in NOISE_PARAMETERS and \
        any(k in base and k != at[-1] for k in NOISE_PARAMETERS)


def probe_outside(doc, srv, method, path, base, errors):
    """Each bound of each scalar field, just outside; returns the count."""
    sent = 0
    for at, prop in scalar_fields(doc, method, path, base):
        pointer = "/" + "/".join(at)
        if second_noise_parameter(path, base, at):
            continue
        for value, bound in outside_values(prop):
            st, body = srv.call(method, path, with_value(base, at, value), srv.key)
            sent += 1
            if not refused_at(st, body, pointer):
                errors.append(f"{method} {path} {pointer}={str(value)[:40]} ({bound}): {st} "
                              f"{body}, expected 400 at {pointer}")
    return sent


def array_lengths(prop, items):
    """Lists just outside the item counts array schema `prop` declares,
    made of the base's first item."""
    out = []
    if prop.get("minItems", 0) >= 1:
        out.append((items[:1] * (prop["minItems"] - 1), f"minItems {prop['minItems']}"))
    if "maxItems" in prop:
        out.append((items[:1] * (prop["maxItems"] + 1), f"maxItems {prop['maxItems']}"))
    return out


def probe_arrays(doc, srv, method, path, base, errors):
    """Each array the base holds, one item fewer or more than its schema
    allows; returns the count."""
    sent = 0
    schema = object_schema(doc, request_schema(doc, method, path), base)
    for name, prop in (schema.get("properties") or {}).items():
        prop = deref(doc, prop)
        if prop.get("type") != "array" or not base.get(name):
            continue
        for value, bound in array_lengths(prop, base[name]):
            status = ARRAY_STATUS.get((method, spec_path(doc, path), name, bound.split()[0]), 400)
            st, body = srv.call(method, path, dict(base, **{name: value}), srv.key)
            sent += 1
            if not refused_at(st, body, "/" + name, status):
                errors.append(f"{method} {path} /{name} of {len(value)} items ({bound}): {st} "
                              f"{body}, expected {status} at /{name}")
    return sent


def probe_huge(doc, srv, method, path, base, skip, errors):
    """Each field with no maximum in the spec, at a huge value; returns the
    count.  These may be taken (and spend budget)."""
    sent = 0
    for at, prop in scalar_fields(doc, method, path, base):
        pointer = "/" + "/".join(at)
        huge = huge_value(prop)
        if huge is None or at[-1] in skip or skip == ALL:
            continue
        st, body = srv.call(method, path, with_value(base, at, huge), srv.key)
        sent += 1
        if refused_at(st, body, pointer):
            errors.append(f"{method} {path} {pointer}={huge}: refused there "
                          f"({body.get('detail')}), but the spec states no maximum")
    return sent


def probe_query(doc, srv, errors):
    """Each bound of each query parameter of a GET, just outside, refused
    with 400 naming the parameter; returns the count."""
    sent = 0
    for path, item in doc["paths"].items():
        op = item.get("get")
        if not op:
            continue
        target = path.replace("{id}", QUERY_IDS.get(path, "rdp"))
        params = [deref(doc, p) for p in (item.get("parameters") or []) +
                  (op.get("parameters") or [])]
        for p in params:
            if p.get("in") != "query":
                continue
            for value, bound in outside_values(deref(doc, p.get("schema", {}))):
                query = urllib.parse.urlencode({p["name"]: value})
                st, body = srv.call("GET", f"{target}?{query}", key=srv.key)
                sent += 1
                if not refused_at(st, body, p["name"]):
                    errors.append(f"GET {path}?{query} ({bound}): {st} {body}, "
                                  f"expected 400 naming {p['name']}")
    return sent


def finished_job(srv):
    """A job that has run, for the query parameters of /v1/jobs/{id}."""
    st, answer = srv.call("PUT", "/v1/datasets/train/data?columns=x:numeric,y:categorical"
                          "&row_count=public", TRAIN_CSV, srv.key, content_type="text/csv")
    assert st in (200, 201), (st, answer)
    st, job = srv.call("POST", "/v1/datasets/train/jobs", TRAIN_JOB, srv.key)
    assert st == 202, (st, job)
    deadline = time.monotonic() + 60 * time_scale()
    while time.monotonic() < deadline:
        st, answer = srv.call("GET", f"/v1/jobs/{job['id']}", key=srv.key)
        if answer.get("state") == "succeeded":
            return job["id"]
        assert answer.get("state") in ("queued", "running"), answer
        time.sleep(0.05)
    raise AssertionError(f"the job did not end: {answer}")


def bounded(doc, schema):
    """Whether a body schema (or one of its variants) gives any field a
    bound this check sends."""
    for variant in [schema] + [deref(doc, v) for v in schema.get("oneOf", [])]:
        for prop in (variant.get("properties") or {}).values():
            prop = scalar(deref(doc, prop))
            if outside_values(prop) or array_lengths(prop, [0]):
                return True
    return False


def uncovered(doc, operations):
    """The operations with a JSON body that has bounds but no base here."""
    covered = {(m, spec_path(doc, p)) for m, p, _, _ in operations}
    out = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            content = op.get("requestBody", {}).get("content", {}) if isinstance(op, dict) else {}
            if "application/json" not in content or (method.upper(), path) in covered:
                continue
            if bounded(doc, deref(doc, content["application/json"]["schema"])):
                out.append(f"{method.upper()} {path}")
    return out


def budgets(srv):
    """Each dataset's budget summary (spent, reserved, remaining)."""
    return {ds: srv.call("GET", f"/v1/datasets/{ds}/budget", key=srv.key)[1] for ds in DATASETS}


def setup(srv):
    """The datasets, the hosted tables, a PATE session and a job that has
    run; returns the operations with their paths made concrete."""
    for body in DATASETS.values():
        st, answer = srv.call("POST", "/v1/datasets", body, srv.key)
        assert st == 201, (st, answer)
    st, answer = srv.call("PUT", "/v1/datasets/table/data?columns=x:numeric",
                          "x\n1\n2\n3\n", srv.key, content_type="text/csv")
    assert st in (200, 201), (st, answer)
    st, answer = srv.call("PUT", "/v1/datasets/fm/data", {"builtin": "fashion-mnist"}, srv.key)
    assert st in (200, 201), (st, answer)
    st, answer = srv.call("POST", "/v1/datasets/rdp/pate/sessions", SESSION, srv.key)
    assert st == 201, (st, answer)
    RUN_IDS["{sid}"] = answer["id"]
    RUN_IDS["{job}"] = finished_job(srv)
    QUERY_IDS["/v1/jobs/{id}"] = QUERY_IDS["/v1/jobs/{id}/model"] = RUN_IDS["{job}"]
    return [(m, concrete(p), b, s) for m, p, b, s in OPERATIONS]


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    errors = []
    sent = 0
    with Server() as srv:
        operations = setup(srv)
        for op in uncovered(doc, operations):
            errors.append(f"{op} has bounded body fields but no base body in OPERATIONS")
        for method, path, base, _ in operations:
            st, answer = srv.call(method, path, base, srv.key)
            if st >= 300:
                errors.append(f"the base of {method} {path} is refused: {st} {answer}")
        before = budgets(srv)
        for method, path, base, _ in operations:
            sent += probe_outside(doc, srv, method, path, base, errors)
            sent += probe_arrays(doc, srv, method, path, base, errors)
        sent += probe_query(doc, srv, errors)
        after = budgets(srv)
        if after != before:
            errors.append(f"the refused requests moved a budget: {before} -> {after}")
        for method, path, base, skip in operations:
            sent += probe_huge(doc, srv, method, path, base, skip, errors)
    return finish(errors, f"{len(operations)} operations, {sent} requests; {len(errors)} errors")


if __name__ == "__main__":
    sys.exit(main())

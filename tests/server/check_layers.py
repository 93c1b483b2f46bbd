#!/usr/bin/env python3
"""Checks server/'s layers: who may include what, and no include or call loops.

usage: check_layers.py SOURCE_ROOT

Each folder of server/ is one layer (a static library, HACKING.md
"Architecture").  A layer may use only the layers below it, and only
through their public header (<folder>.h); its own other headers are its
own.  Third-party headers have owners too:
  sqlite3.h     only in store/
  libpq-fe.h    only in store/
  microhttpd.h  only in http/
  jansson.h     never in store/ or base/
and base/ includes no header of dpgate's outside base/.

Loops: the include graph between server files must have none, and neither
may the call graph (a file calls another when it names a function defined
there, found as tests/accountant/check_call_cycles.py finds them).  A call
from a layer to one above it is reported on its own, since it is a loop
between the libraries even when no file loop shows it.

Prints every violation; exits 1 when there is one.
"""
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, '..', 'accountant'), os.path.join(HERE, '..', 'common')]
import check_call_cycles as calls  # noqa: E402  (shared: strip, DEF, loops)
from check_report import finish  # noqa: E402

# Each layer and the layers it may use, bottom up.
LAYERS = {
    'base': [],
    'json': ['base'],
    'store': ['base'],
    'http': ['base', 'json', 'store'],
    'jobs': ['base', 'json', 'store', 'http'],
    'api': ['base', 'json', 'store', 'http', 'jobs'],
    'cli': ['base', 'json', 'store', 'http', 'jobs', 'api'],
}
SYSTEM_OWNERS = {'sqlite3.h': {'store'}, 'libpq-fe.h': {'store'}, 'microhttpd.h': {'http'}}
SYSTEM_BANNED = {'jansson.h': {'store', 'base'}}
# dpgate headers from outside server/ that base/ must not see either.
OUTSIDE_SERVER = ('acct.h', 'mech.h', 'trn.h')
KEYWORDS = {'if', 'for', 'while', 'switch', 'return', 'sizeof', 'do', 'else'}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def sources(server):
    """{path relative to server/: text} of every .c and .h file."""
    out = {}
    for dirpath, _, files in os.walk(server):
        for name in sorted(files):
            if name.endswith(('.c', '.h')):
                path = os.path.join(dirpath, name)
                with open(path, encoding='utf-8') as f:
                    out[os.path.relpath(path, server)] = f.read()
    return out


def layer_of(rel):
    parts = rel.split(os.sep)
    return parts[0] if len(parts) > 1 else None


def check_includes(src, problems):
    by_name = {}
    for rel in src:
        by_name.setdefault(os.path.basename(rel), []).append(rel)
    edges = {rel: {} for rel in src}
    for rel, text in src.items():
        layer = layer_of(rel)
        if layer is None:
            problems.append(f'{rel}: a file outside every layer folder')
            continue
        if layer not in LAYERS:
            problems.append(f'{rel}: folder {layer}/ is no known layer (add it to LAYERS)')
            continue
        for kind, name in INCLUDE.findall(text):
            base = os.path.basename(name)
            owners = SYSTEM_OWNERS.get(base)
            if owners is not None and layer not in owners:
                problems.append(f'{rel}: includes {base}, which only {"/".join(sorted(owners))}/ may')
            if layer in SYSTEM_BANNED.get(base, ()):
                problems.append(f'{rel}: includes {base}, which {layer}/ may not')
            if layer == 'base' and base in OUTSIDE_SERVER:
                problems.append(f'{rel}: base/ includes {base}; base/ depends on nothing')
            if kind != '"':
                continue
            for target in by_name.get(base, []):
                edges[rel][target] = [base]
                other = layer_of(target)
                if other == layer or other is None:
                    continue
                if other not in LAYERS[layer]:
                    problems.append(f'{rel}: includes {target}, but {layer}/ may not use {other}/')
                elif base != other + '.h':
                    problems.append(f'{rel}: includes {target}, which is not {other}/\'s public '
                                    f'header {other}.h')
    for comp in calls.loops(edges):
        problems.append('include loop between: ' + ', '.join(comp))


def call_graph(src):
    code = {rel: calls.strip(text) for rel, text in src.items() if rel.endswith('.c')}
    owner = {}
    for rel, text in code.items():
        for m in calls.DEF.finditer(text):
            if m.group(1) not in KEYWORDS:
                owner[m.group(1)] = rel
    edges = {rel: {} for rel in code}
    for rel, text in code.items():
        for fn in set(re.findall(r'\b[A-Za-z_]\w*\b', text)):
            other = owner.get(fn)
            if other and other != rel:
                edges[rel].setdefault(other, []).append(fn)
    return edges


def check_calls(src, problems):
    edges = call_graph(src)
    for a in sorted(edges):
        for b in sorted(edges[a]):
            la, lb = layer_of(a), layer_of(b)
            if la != lb and la in LAYERS and lb not in LAYERS[la]:
                problems.append(f'{a} calls {b} ({" ".join(sorted(edges[a][b]))}): '
                                f'{la}/ may not use {lb}/')
    for comp in calls.loops(edges):
        problems.append('call loop between: ' + ', '.join(comp))
    return edges


def main():
    if len(sys.argv) != 2:
        print(__doc__.split('\n\n')[1])
        return 2
    server = os.path.join(sys.argv[1], 'server')
    src = sources(server)
    problems = []
    check_includes(src, problems)
    edges = check_calls(src, problems)
    if not src or not any(edges.values()):
        print('no server files or no calls between them found: the scan is broken')
        return 1
    return finish(problems, f'{len(src)} files, {len(problems)} problem(s)')


if __name__ == '__main__':
    sys.exit(main())

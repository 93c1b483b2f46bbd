#!/usr/bin/env python3
"""Checks that the files of one library folder call each other without a loop.

For every .c file it finds the functions the file exports (non-static
definitions) and which other files name them; a call edge a -> b means a
uses a function defined in b.  Shared helpers belong in leaf files
(acct_event.c, acct_round.c, acct_numeric.c): a loop between files means one
of them lives in the wrong place.  Prints the edges, and every loop found;
exits 1 when there is one.
"""
import os
import re
import sys

DEF = re.compile(r'^(?!static\b)[A-Za-z_][^;{}()]*?\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*\{',
                 re.M)


def strip(text):
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', ' ', text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def graph(folder):
    src = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith('.c'):
            with open(os.path.join(folder, name), encoding='utf-8') as f:
                src[name] = strip(f.read())
    owner = {}
    for name, text in src.items():
        for m in DEF.finditer(text):
            owner[m.group(1)] = name
    edges = {name: {} for name in src}
    for name, text in src.items():
        used = set(re.findall(r'\b[A-Za-z_]\w*\b', text))
        for fn in used:
            other = owner.get(fn)
            if other and other != name:
                edges[name].setdefault(other, []).append(fn)
    return edges


def loops(edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    edges = graph(sys.argv[1])
    for a in sorted(edges):
        for b in sorted(edges[a]):
            print(f'{a} -> {b}: {" ".join(sorted(edges[a][b]))}')
    found = loops(edges)
    for comp in found:
        print('call loop between: ' + ', '.join(comp))
    if not any(edges.values()):
        print('no calls between files found: the scan is broken')
        return 1
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())

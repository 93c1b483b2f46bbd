#!/usr/bin/env python3
"""Checks that no function in the given .c files' folder is longer than a limit.

A function here runs from the first line of its signature to its closing
brace; the code's layout puts both braces of a function body alone at
column 0, which is how bodies are found.  Prints every function over the
limit with its length; exits 1 when there is one.
"""
import os
import sys


def functions(path):
    with open(path, encoding='utf-8') as f:
        lines = f.read().split('\n')
    start = None
    for i, line in enumerate(lines):
        if line == '{' and start is None:
            start = i
            # Back to the first line of the signature.
            while start > 0 and lines[start - 1] and not lines[start - 1].startswith(
                    ('/*', ' *', '#', '}')) and not lines[start - 1].endswith(';'):
                start -= 1
        elif line == '}' and start is not None:
            head = lines[start]
            name = head.split('(')[0].split()[-1].lstrip('*') if '(' in head else head
            yield name, i - start + 1
            start = None


def main():
    folder, limit = sys.argv[1], int(sys.argv[2])
    found = 0
    long_ones = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith('.c'):
            continue
        for fn, n in functions(os.path.join(folder, name)):
            found += 1
            if n > limit:
                long_ones.append(f'{name}: {fn} is {n} lines, over {limit}')
    for line in long_ones:
        print(line)
    if found == 0:
        print('no functions found: the scan is broken')
        return 1
    print(f'{found} functions, {len(long_ones)} over {limit} lines')
    return 1 if long_ones else 0


if __name__ == '__main__':
    sys.exit(main())

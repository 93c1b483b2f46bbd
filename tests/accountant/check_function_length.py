#!/usr/bin/env python3
"""Checks that no function in the .c files under the given folders is longer
than a limit.

Usage: check_function_length.py DIR [DIR ...] LIMIT

Each folder is searched recursively.  A function here runs from the first
line of its signature to its closing brace; the code's layout puts both
braces of a function body alone at column 0, which is how bodies are
found.  Prints every function over the limit with its length; exits 1 when
there is one, or when no function was found at all (a broken scan must not
pass).
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


def c_files(folder):
    """The .c files under folder, recursively, in a stable order."""
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            if name.endswith('.c'):
                yield os.path.join(root, name)


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().split('\n\n')[1])
        return 2
    folders, limit = sys.argv[1:-1], int(sys.argv[-1])
    found = 0
    long_ones = []
    for folder in folders:
        if not os.path.isdir(folder):
            print(f'{folder}: not a folder')
            return 2
        base = os.path.dirname(os.path.abspath(folder))
        for path in c_files(folder):
            shown = os.path.relpath(path, base)
            for fn, n in functions(path):
                found += 1
                if n > limit:
                    long_ones.append(f'{shown}: {fn} is {n} lines, over {limit}')
    for line in long_ones:
        print(line)
    if found == 0:
        print('no functions found: the scan is broken')
        return 1
    print(f'{found} functions, {len(long_ones)} over {limit} lines')
    return 1 if long_ones else 0


if __name__ == '__main__':
    sys.exit(main())

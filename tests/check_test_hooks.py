#!/usr/bin/env python3
"""Checks that hooks which exist only for tests compile only under DPG_TESTING.

A hook is a function whose name ends in `_for_tests`, or one named on the
command line.  Every line of the product folders that names a hook outside
a comment must sit inside an `#ifdef DPG_TESTING` (or `#if
defined(DPG_TESTING)`) block, so that a build without tests carries none.
Each hook named on the command line must appear at least once, so that a
rename cannot make the check pass by finding nothing.  Prints every
offending line; exits 1 when there is one.

usage: check_test_hooks.py SOURCE_ROOT FOLDER... -- HOOK...
"""
import os
import re
import sys


def code_lines(path):
    """Yields (number, text) of each line with its comments removed."""
    with open(path, encoding='utf-8') as f:
        text = f.read()
    # Blank out comments and string literals, keeping the line breaks.
    text = re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"',
                  lambda m: '\n' * m.group(0).count('\n') if m.group(0)[0] == '/' else '""',
                  text, flags=re.S)
    for i, line in enumerate(text.split('\n'), 1):
        yield i, line


def check_file(path, hook_re, seen):
    bad = []
    stack = []  # one bool per open #if: does it (or an outer one) test DPG_TESTING?
    for n, line in code_lines(path):
        s = line.strip()
        if re.match(r'#\s*if', s):
            guarded = bool(re.match(r'#\s*(ifdef\s+DPG_TESTING\b|if\s+defined\s*\(?\s*DPG_TESTING\b)', s))
            stack.append(guarded or (stack[-1] if stack else False))
            continue
        if re.match(r'#\s*else', s) or re.match(r'#\s*elif', s):
            # The other branch of a DPG_TESTING test is the build without it.
            if stack:
                outer = stack[-2] if len(stack) > 1 else False
                stack[-1] = outer
            continue
        if re.match(r'#\s*endif', s):
            if stack:
                stack.pop()
            continue
        for m in hook_re.finditer(line):
            seen.add(m.group(0))
            if not (stack and stack[-1]):
                bad.append('%s:%d: %s outside #ifdef DPG_TESTING' % (path, n, m.group(0)))
    return bad


def main(argv):
    if '--' not in argv:
        print(__doc__)
        return 2
    sep = argv.index('--')
    root, folders, hooks = argv[1], argv[2:sep], argv[sep + 1:]
    names = [re.escape(h) for h in hooks] + [r'[A-Za-z_][A-Za-z0-9_]*_for_tests']
    hook_re = re.compile(r'\b(?:%s)\b' % '|'.join(names))
    seen, bad = set(), []
    for folder in folders:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if name.endswith(('.c', '.h')):
                    bad += check_file(os.path.join(dirpath, name), hook_re, seen)
    for h in hooks:
        if h not in seen:
            bad.append('hook %s not found in %s' % (h, ', '.join(folders)))
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))

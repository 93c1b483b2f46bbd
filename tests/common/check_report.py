"""check_report.py: how the check scripts of the tree end their run.

Each problem on a line of its own, then one summary line; the exit status
is 1 when there was a problem, so that meson counts the test failed.  One
helper, so that every structural check reports alike.
"""
import importlib
import sys


def module_or_skip(name, package):
    """The module `name`, or exit 77 (meson's "skipped") when `package`,
    which provides it, is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        print(f"{package} not installed: skipped")
        sys.exit(77)


def finish(problems, summary):
    """Prints the problems and the summary; returns the exit status."""
    for p in problems:
        print(p)
    print(summary)
    return 1 if problems else 0

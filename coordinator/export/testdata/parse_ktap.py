#!/usr/bin/env python3
"""Parses KTAP with the kernel's own tools/testing/kunit/kunit_parser.py and
prints what it made of it as one JSON line: the top test's status, counts
(passed, failed, crashed, skipped, errors) and the names of the leaf tests.
Usage: parse_ktap.py KUNIT_DIR FILE (KUNIT_DIR holds kunit_parser.py)."""
import json
import os
import sys


def leaves(test):
    if not test.subtests:
        return [(test.name, test.status.name)]
    out = []
    for t in test.subtests:
        out += leaves(t)
    return out


def main():
    if len(sys.argv) != 3:
        print("usage: parse_ktap.py KUNIT_DIR FILE", file=sys.stderr)
        return 2
    # The parser prints its report on standard output (kunit_printer keeps
    # its own handle on it): send that to standard error, keep ours for JSON.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.path.insert(0, sys.argv[1])
    import kunit_parser  # the kernel's parser, unpacked by the test

    with open(sys.argv[2]) as f:
        lines = f.read().splitlines(keepends=True)
    test = kunit_parser.parse_run_tests(lines)
    sys.stdout.flush()
    c = test.counts
    out.write(json.dumps({
        "status": test.status.name,
        "passed": c.passed, "failed": c.failed, "crashed": c.crashed,
        "skipped": c.skipped, "errors": c.errors,
        "leaves": [{"name": n, "status": s} for n, s in leaves(test)],
    }) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

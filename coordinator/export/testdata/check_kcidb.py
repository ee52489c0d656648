#!/usr/bin/env python3
"""Validates KCIDB documents against kcidb-v5.3.schema.json (beside this file)
with Debian's python3-jsonschema, date-time and other formats checked too.
Usage: check_kcidb.py FILE...  Exit 0: every file is valid; 1: one is not
(the errors on stderr); 2: bad use."""
import json
import os
import sys

import jsonschema


def main():
    if len(sys.argv) < 2:
        print("usage: check_kcidb.py FILE...", file=sys.stderr)
        return 2
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "kcidb-v5.3.schema.json")) as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    bad = 0
    for path in sys.argv[1:]:
        with open(path) as f:
            doc = json.load(f)
        for err in validator.iter_errors(doc):
            bad += 1
            where = "/".join(str(p) for p in err.absolute_path)
            print(f"{path}: {where}: {err.message}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

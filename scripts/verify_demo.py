"""Check the demo database against its input: every key, its last value, nothing extra."""

from __future__ import annotations

import argparse
import json
import random
import sys

from slatelib import DbReader
from slatelib.objstore import split_db_url


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--data", required=True)
    args = ap.parse_args()
    expected: dict[bytes, bytes] = {}
    with open(args.data) as f:
        for line in f:
            obj = json.loads(line)
            expected[bytes.fromhex(obj["key"])] = bytes.fromhex(obj["value"])
    store, path = split_db_url(args.db)
    with DbReader.open(path, store, mode="latest") as reader:  # read-only: writes nothing
        got = dict(reader.scan())
        sample = random.Random(7).sample(sorted(expected), k=min(1000, len(expected)))
        bad_gets = [k for k in sample if reader.get(k) != expected[k]]
    missing = expected.keys() - got.keys()
    extra = got.keys() - expected.keys()
    wrong = [k for k in expected.keys() & got.keys() if got[k] != expected[k]]
    report = {"keys_expected": len(expected), "keys_scanned": len(got), "missing": len(missing),
              "extra": len(extra), "wrong_values": len(wrong), "bad_point_gets": len(bad_gets)}
    print(json.dumps({"verify": report}))
    ok = not (missing or extra or wrong or bad_gets)
    print("demo verified: every key readable with its last value" if ok else "DEMO MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

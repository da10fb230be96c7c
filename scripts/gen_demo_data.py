"""Generate the demo data set: JSON lines {"key": hex, "value": hex} in random order.

Keys are ``user:%08d``; about 2% of the keys appear twice (the later line wins in a bulk
load), and values vary from a few bytes to a few KiB.
"""

from __future__ import annotations

import argparse
import json
import random


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    ids = list(range(args.rows))
    ids += rng.sample(ids, k=args.rows // 50)
    rng.shuffle(ids)
    with open(args.out, "w") as f:
        for n, i in enumerate(ids):
            key = f"user:{i:08d}".encode()
            size = rng.choice((8, 32, 100, 100, 100, 400, 3000))
            body = f'{{"id":{i},"v":{n},"pad":"'.encode() + b"x" * size + b'"}'
            f.write(json.dumps({"key": key.hex(), "value": body.hex()}) + "\n")


if __name__ == "__main__":
    main()

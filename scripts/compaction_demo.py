"""The demo of ``make run``: write a database with the slatelib writer, then (after the
Spark compaction job ran) verify every key.

    compaction_demo.py write  --db URL --rows N --l0s K --model FILE
    compaction_demo.py verify --db URL --model FILE [--report FILE]

``write`` opens ``slatelib.Db`` and writes ``--rows`` operations in random key order in
batches: puts, overwrites of earlier keys and deletes, with a memtable flush after each
``1/--l0s`` of them, so the database ends up with several overlapping L0 SSTs. The last
state of every key goes to ``--model`` (JSON lines, hex; ``null`` for a deleted key).

``verify`` reads the database back with ``DbReader`` (read-only) and checks every key of
the model with a full scan and point gets; with ``--report`` it also checks that the
compaction job committed and that the L0 views it compacted are gone. Exit code 1 on any
difference.
"""

from __future__ import annotations

import argparse
import json
import random
import sys

from slatelib import Db, DbReader, WriteBatch
from slatelib.objstore import open_store, split_db_url
from slatelib.store.manifest_store import ManifestStore


def write(url: str, rows: int, l0s: int, model_path: str, seed: int) -> None:
    store, path = split_db_url(url)
    rng = random.Random(seed)
    universe = max(1, rows * 2 // 3)  # so about a third of the puts overwrite a key
    model: dict[bytes, bytes | None] = {}
    per_l0 = max(1, rows // l0s)
    batch_size = 500
    with Db.open(path, store) as db:
        written = 0
        while written < rows:
            batch = WriteBatch()
            for _ in range(min(batch_size, rows - written)):
                key = b"user:%08d" % rng.randrange(universe)
                if model.get(key) is not None and rng.random() < 0.1:
                    batch.delete(key)
                    model[key] = None
                else:
                    value = b"%s|%d|" % (key, written) + rng.randbytes(rng.randrange(8, 64))
                    batch.put(key, value)
                    model[key] = value
                written += 1
            db.write(batch)
            if written % per_l0 < batch_size and written < rows:
                db.flush("memtable")
        db.flush("memtable")
        l0 = len(db.manifest.l0)
    with open(model_path, "w", encoding="utf-8") as f:
        for k, v in sorted(model.items()):
            f.write(json.dumps({"key": k.hex(), "value": None if v is None else v.hex()}) + "\n")
    live = sum(1 for v in model.values() if v is not None)
    print(json.dumps({"db": url, "operations": rows, "keys": len(model), "live_keys": live,
                      "l0_ssts": l0}))


def verify(url: str, model_path: str, report_path: str | None) -> int:
    store, path = split_db_url(url)
    expected: dict[bytes, bytes | None] = {}
    with open(model_path, encoding="utf-8") as f:
        for line in f:
            obj = json.loads(line)
            expected[bytes.fromhex(obj["key"])] = (None if obj["value"] is None
                                                   else bytes.fromhex(obj["value"]))
    live = {k: v for k, v in expected.items() if v is not None}
    problems: list[str] = []
    with DbReader.open(path, store, mode="latest") as reader:  # read-only
        got = dict(reader.scan())
        bad_gets = [k for k, v in expected.items() if reader.get(k) != v]
    if got != live:
        missing = live.keys() - got.keys()
        extra = got.keys() - live.keys()
        wrong = [k for k in live.keys() & got.keys() if live[k] != got[k]]
        problems.append(f"scan: {len(missing)} missing, {len(extra)} extra, "
                        f"{len(wrong)} wrong values")
    if bad_gets:
        problems.append(f"get: {len(bad_gets)} keys wrong, e.g. {bad_gets[0]!r}")
    manifest = ManifestStore(open_store(store), path).read_latest().value
    if report_path:
        with open(report_path, encoding="utf-8") as f:
            report = json.load(f)
        [db] = report["databases"]
        if db.get("outcome") != "committed":
            problems.append(f"the compaction did not commit: {db.get('outcome') or db}")
        compacted = {s for s in db.get("sources", []) if s.startswith("l0:")}
        remaining = {f"l0:{v.id}" for v in manifest.l0}
        if compacted & remaining:
            problems.append("compacted L0 views are still in the manifest")
    summary = {"keys_checked": len(expected), "live_keys": len(live), "scan_keys": len(got),
               "l0_views": len(manifest.l0),
               "sorted_runs": [(r.id, len(r.views)) for r in manifest.compacted],
               "ok": not problems}
    print(json.dumps(summary))
    for p in problems:
        sys.stderr.write(f"verify: {p}\n")
    return 1 if problems else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("--db", required=True)
    w.add_argument("--rows", type=int, default=200_000)
    w.add_argument("--l0s", type=int, default=6)
    w.add_argument("--model", required=True)
    w.add_argument("--seed", type=int, default=7)
    v = sub.add_parser("verify")
    v.add_argument("--db", required=True)
    v.add_argument("--model", required=True)
    v.add_argument("--report")
    args = ap.parse_args()
    if args.command == "write":
        write(args.db, args.rows, args.l0s, args.model, args.seed)
        return 0
    return verify(args.db, args.model, args.report)


if __name__ == "__main__":
    raise SystemExit(main())

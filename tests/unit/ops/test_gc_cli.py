"""``slate … gc``: JSON lines of decisions, then the report; refusals as exit codes."""

from __future__ import annotations

import json
import uuid

import pytest

from slatelib.cli.app import main
from slatelib.objstore import open_store
from tests.unit.gc_support import DbWriter, manifest


def test_slate_gc_prints_every_decision_then_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"memory://cli{uuid.uuid4().hex[:10]}"
    w = DbWriter(open_store(url + "/"), "db")
    w.manifests_upto(3, manifest(replay_after=2, last_seen=2))
    w.wal(1)
    w.wal(2)
    assert main(["--db", f"{url}/db", "gc", "--min-age", "0s", "--force"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    decisions, report = lines[:-1], lines[-1]["report"]
    assert [(d["action"], d["path"]) for d in decisions] == [
        ("delete", "db/manifest/00000000000000000001.manifest"),
        ("delete", "db/manifest/00000000000000000002.manifest"),
        ("keep", "db/manifest/00000000000000000003.manifest"),
        ("delete", "db/wal/00000000000000000001.sst"),
        ("keep", "db/wal/00000000000000000002.sst"),
    ]
    assert report["dry_run"] is True and report["totals"]["to_delete"] == 3
    assert len(w.listing()) == 5
    assert main(["--db", f"{url}/db", "gc", "--min-age", "0s", "--force", "--no-dry-run"]) == 0
    assert w.listing() == {"db/manifest/00000000000000000003.manifest",
                           "db/wal/00000000000000000002.sst", "db/gc/manifest.boundary"}


def test_slate_gc_refuses_a_low_min_age_and_a_root_without_manifest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"memory://cli{uuid.uuid4().hex[:10]}"
    assert main(["--db", f"{url}/db", "gc", "--min-age", "10s"]) == 2
    assert "below the safety floor 5m" in capsys.readouterr().err
    assert main(["--db", f"{url}/nothing", "gc"]) == 5
    assert "not a database root" in capsys.readouterr().err

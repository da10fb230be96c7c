"""``slate … gc``: JSON lines of decisions, then the report; refusals as exit codes."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

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
    decisions, job = lines[:-1], lines[-1]
    assert (job["job"], job["status"], job["dry_run"]) == ("gc", "success", True)
    [report] = job["databases"]
    assert (report["db"], report["status"], report["exit_code"]) == (f"{url}/db", "success", 0)
    assert job["totals"]["to_delete"] == 3 and job["totals"]["databases"] == 1
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


def test_slate_gc_refuses_a_database_url_with_a_trailing_slash(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"memory://cli{uuid.uuid4().hex[:10]}"
    w = DbWriter(open_store(url + "/"), "db")
    w.manifests_upto(3, manifest(replay_after=2, last_seen=2))
    w.wal(1)
    before = w.listing()
    assert main(["--db", f"{url}/db/", "gc", "--min-age", "0s", "--force", "--no-dry-run"]) == 2
    err = capsys.readouterr().err
    assert "ends with '/': that names a prefix" in err and "nothing was deleted" in err
    assert main(["--store", f"{url}/", "--path", "db/", "gc", "--no-dry-run"]) == 2
    assert w.listing() == before


def test_slate_ls_labels_the_boundary_lock_file_after_a_second_local_gc(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"file://{tmp_path}/db"
    w = DbWriter(open_store(f"file://{tmp_path}"), "db")
    w.manifests_upto(3, manifest(replay_after=2, last_seen=2))
    args = ["--db", url, "gc", "--min-age", "0s", "--force", "--no-dry-run"]
    assert main(args) == 0
    w.manifest(4, manifest(replay_after=2, last_seen=2))
    assert main(args) == 0  # moves the existing boundary: 0.17 cannot do this on a local disk
    capsys.readouterr()
    assert main(["--db", url, "ls"]) == 0
    rows = {r["path"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())
            if "totals" not in r}
    lock = rows[f"{str(tmp_path).lstrip('/')}/db/gc/manifest.boundary.lock"]
    assert lock["size"] == 0
    assert lock["referenced_by"][0].startswith("lock file of gc/manifest.boundary")
    assert (tmp_path / "db" / "gc" / "manifest.boundary").read_bytes() == b"3"


def test_slate_gc_per_directory_flags(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"memory://cli{uuid.uuid4().hex[:10]}"
    w = DbWriter(open_store(url + "/"), "db")
    w.manifests_upto(3, manifest(replay_after=2, last_seen=2))
    w.wal(1)
    w.wal(2)
    # no --no-dry-run: [gc] dry_run (true) stays the default, but wal/ deletes on its own
    assert main(["--db", f"{url}/db", "gc", "--min-age", "0s", "--force", "--no-wal-dry-run",
                 "--no-boundary-files"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    job = lines[-1]
    [report] = job["databases"]
    assert job["dry_run"] is False and report["boundary_files_enabled"] is False
    assert (report["directories"]["wal"]["dry_run"], report["directories"]["manifest"]["dry_run"]
            ) == (False, True)
    assert w.listing() == {"db/manifest/00000000000000000001.manifest",
                           "db/manifest/00000000000000000002.manifest",
                           "db/manifest/00000000000000000003.manifest",
                           "db/wal/00000000000000000002.sst"}
    assert main(["--db", f"{url}/db", "gc", "--manifest-min-age", "10s"]) == 2
    assert "manifest_options min_age 10s is below the safety floor" in capsys.readouterr().err

"""The export job's report and headline."""

from __future__ import annotations

from slatelib.ops.export.report import db_entry, export_report


def _entry(**kw: object) -> dict[str, object]:
    fields = {"checkpoint": {"id": "c1", "manifest_id": 7}, "target": "file:///t",
              "format": "delta", "mode": "overwrite", "writer": "delta-rs", "rows": 1234,
              "bytes": 2_000_000, "files": 2, **kw}
    return db_entry("file:///db", 0, fields)


def test_full_export_report() -> None:
    r = export_report(0, [_entry()], seconds=3.5)
    assert r["job"] == "export" and r["status"] == "success"
    assert r["totals"] == {"databases": 1, "failed": 0, "rows": 1234, "bytes": 2_000_000,
                           "files": 2}
    assert r["headline"].startswith("exported 1,234 rows (2.0 MB, 2 files) of checkpoint c1 "
                                    "(manifest 7) to delta file:///t (delta-rs)")


def test_incremental_and_failed_headlines() -> None:
    inc = _entry(mode="incremental", since="c0", changes={"upserts": 5, "deletes": 2})
    assert "applied 5 upserts and 2 deletes since checkpoint c0" in \
        export_report(0, [inc], seconds=1)["headline"]
    failed = db_entry("file:///db", 5, {"error": {"type": "X", "message": "no\nmanifest"}})
    r = export_report(5, [failed], seconds=1)
    assert r["status"] == "data_error"
    assert r["headline"].startswith(
        "exported nothing; 1 of 1 databases failed (data_error): no manifest; ")
    long = db_entry("file:///db", 5, {"error": {"type": "X", "message": "x" * 500}})
    line = export_report(5, [long], seconds=1)["headline"]
    assert "x" * 199 + "…; " in line and "x" * 200 not in line

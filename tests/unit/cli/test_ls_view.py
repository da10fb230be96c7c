"""``slate ls``'s view (slatelib.cli.ls_view) and its JSON writer against the per-object
reference: the output of ``slate ls`` is byte for byte what classifying every listed object
on its own gives (the implementation before the columnar view), on golden fixtures with
look-alike, nested, oddly named, unreferenced and missing objects, a lost checkpoint
manifest and a clone's source SSTs."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from slatelib.cli import ls_cmd
from slatelib.cli.app import main
from slatelib.cli.ls_view import iso_times, live_set, plain_json, reasons
from slatelib.cli.output import iso_ms
from slatelib.core.gc_plan import build_rules, referenced_ssts
from slatelib.core.gc_rules import GcOptions
from slatelib.errors import ObjectMissingError
from slatelib.format import manifest_native, seam
from slatelib.ids import Ulid
from slatelib.objstore import ObjectMeta, ObjectStore, open_store
from slatelib.ops.gc.state import read_compactions_state
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore

NOW_MS = 1_800_000_000_000
DBS = ("basic", "ckpt_src", "ckpt_clone", "ckpt_clone_proj", "gc_collected", "segmented")


def _reference_rows(store: ObjectStore, root: str) -> list[dict[str, Any]]:
    """Every row as ``ls`` printed it before the view: each listed object classified on its
    own, then the referenced objects that are not listed (HEAD for a source's SSTs)."""
    ms = ManifestStore(store, root)
    latest = ms.read_latest()
    live, lost = live_set(ms, latest)
    state = read_compactions_state(store, root)
    rules = build_rules(root, live, state, now_ms=NOW_MS, options=GcOptions())
    refs = referenced_ssts(live)
    placed: dict[Ulid, str] = {}  # the first live manifest naming an SST says where it is
    for m in live.manifests().values():
        ext = {sid: e.path for e in m.external_dbs for sid in e.sst_ids}
        for sid in m.referenced_sst_ids():
            placed.setdefault(sid, DbPaths(ext.get(sid, root)).compacted(sid))
    expected = {path: refs[sid] for sid, path in placed.items()}
    for mid, who in lost.items():
        expected[ms.path(mid)] = f"pinned by {who}"
    rows: list[dict[str, Any]] = []
    for meta in sorted(store.list(root), key=lambda m: m.path):
        kind, why = reasons(rules, state.version_id, refs, meta)
        rows.append({"path": meta.path, "kind": kind, "size": meta.size,
                     "last_modified_ms": meta.last_modified_ms,
                     "last_modified": iso_ms(meta.last_modified_ms),
                     "referenced_by": why or ["unreferenced"]})
    listed = {r["path"] for r in rows}
    for path in sorted(p for p in expected if p not in listed):
        row: dict[str, Any] = {"path": path, "kind": "compacted" if "/compacted/" in path
                               else "manifest"}
        outside = not path.startswith(root + "/")
        try:
            row["size"] = store.head(path).size if outside else None
        except ObjectMissingError:
            row["size"] = None
        if outside:
            row["external"] = True
        if row["size"] is None:
            row["missing"] = True
        row["referenced_by"] = [expected[path]]
        rows.append(row)
    return rows


def _reference_output(store: ObjectStore, root: str, fmt: str) -> str:
    rows = _reference_rows(store, root)
    tot = ls_cmd.totals(rows)
    if fmt == "table":
        return ls_cmd._table(rows, tot)
    lines = [json.JSONEncoder().encode(r) for r in rows]
    return "".join(line + "\n" for line in lines) + json.dumps({"totals": tot}) + "\n"


def _mangle(root: Path) -> None:
    """Objects classify must handle, next to the referenced SSTs matched by path."""
    store = open_store(f"file://{root}")
    clone = ManifestStore(store, "ckpt_clone").read_latest().value
    external = {sid for e in clone.external_dbs for sid in e.sst_ids}
    own = sorted(clone.referenced_sst_ids() - external)
    name = DbPaths("ckpt_clone").compacted(own[0])
    for extra, data in ((name[:-4].lower() + ".sst", b"x"), (name[:-4] + "/nested.sst", b"x"),
                        (DbPaths("ckpt_clone").compacted(own[0] + 1), b""),
                        ("ckpt_clone/compacted/odd \u00e9 \"q\"\\.sst", b"xy")):
        (root / extra).parent.mkdir(parents=True, exist_ok=True)
        (root / extra).write_bytes(data)
    (root / DbPaths("ckpt_clone").compacted(own[-1])).unlink()  # missing, own
    (root / DbPaths("ckpt_src").compacted(sorted(external)[0])).unlink()  # missing, external
    src = ManifestStore(store, "ckpt_src")
    latest = src.read_latest()
    pinned = sorted({c.manifest_id for c in latest.value.checkpoints} - {latest.id})
    (root / src.path(pinned[0])).unlink()  # a checkpoint's manifest is gone


@pytest.fixture
def mangled(fixture_copy: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _mangle(fixture_copy)
    from slatelib import clock

    monkeypatch.setattr(clock.SYSTEM_CLOCK, "now_ms", lambda: NOW_MS)
    return fixture_copy


def _slate_ls(root: Path, db: str, fmt: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["--format", fmt, "--store", f"file://{root}", "--path", db, "ls"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("fmt", ["json", "table"])
def test_ls_output_is_byte_identical_to_classifying_each_object(
    mangled: Path, fmt: str, native: bool, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if not native:
        monkeypatch.setattr(manifest_native, "ext", None)
        monkeypatch.setattr(seam, "_manifest_ext", None)  # names formatted in Python
    monkeypatch.setattr(ls_cmd, "_ROWS_PER_WRITE", 3)  # batches end between every kind of row
    store = open_store(f"file://{mangled}")
    for db in DBS:
        got = _slate_ls(mangled, db, fmt, capsys)
        assert got == _reference_output(store, db, fmt), db
    clone = _slate_ls(mangled, "ckpt_clone", "json", capsys) if fmt == "json" else ""
    if fmt == "json":
        assert '"missing": true, "referenced_by"' in clone and '"external": true' in clone
        assert "\\u00e9 \\\"q\\\"\\\\.sst" in clone  # escaped as the encoder does


class _Reshaped:
    """A store whose listing is reversed and may be altered (what no backend does, but
    ``ls`` must still print what the per-object reference prints)."""

    def __init__(self, inner: ObjectStore, alter: Any = None) -> None:
        self._inner = inner
        self._alter = alter

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def list(self, prefix: str, **bounds: Any) -> Iterator[ObjectMeta]:
        metas = list(self._inner.list(prefix, **bounds))
        if self._alter is not None:
            metas = self._alter(metas)
        return iter(metas[::-1])


def _float_sizes(metas: list[ObjectMeta]) -> list[ObjectMeta]:
    return [replace(m, size=float(m.size)) if "/compacted/" in m.path else m  # type: ignore[arg-type]
            for m in metas]


def _bool_times(metas: list[ObjectMeta]) -> list[ObjectMeta]:
    return [replace(m, last_modified_ms=True) if "/compacted/" in m.path else m for m in metas]


@pytest.mark.parametrize("alter", [None, _float_sizes, _bool_times])
@pytest.mark.parametrize("db", ["ckpt_clone", "basic"])
def test_ls_of_an_unsorted_listing_with_odd_types_matches_the_reference(
    mangled: Path, alter: Any, db: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = _Reshaped(open_store(f"file://{mangled}"), alter)
    monkeypatch.setattr("slatelib.cli.app.open_store", lambda url: store)
    got = _slate_ls(mangled, db, "json", capsys)
    assert got == _reference_output(store, db, "json")
    if alter is _float_sizes:
        assert '"kind": "compacted", "size": ' in got and ".0, " in got


def test_ls_of_a_listing_that_repeats_one_sst_and_misses_another(
    mangled: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """As many listed objects as referenced SSTs, but one twice: the other is missing."""
    inner = open_store(f"file://{mangled}")
    m = ManifestStore(inner, "basic").read_latest().value
    referenced = {DbPaths("basic").compacted(sid) for sid in m.referenced_sst_ids()}
    assert len(referenced) > 2

    def repeat(metas: list[ObjectMeta]) -> list[ObjectMeta]:
        at = [i for i, meta in enumerate(metas) if meta.path in referenced]
        if len(at) > 1:
            metas[at[1]] = metas[at[0]]
        return metas

    store = _Reshaped(inner, repeat)
    monkeypatch.setattr("slatelib.cli.app.open_store", lambda url: store)
    got = _slate_ls(mangled, "basic", "json", capsys)
    assert got == _reference_output(store, "basic", "json")
    assert got.count('"missing": true') == 1


def test_iso_times_equal_iso_ms() -> None:
    r = random.Random(5)
    values = [0, 1, 999, 1000, 86_399_999, 86_400_000, -1, -1000, -86_400_001,
              253_402_300_799_999, 253_402_300_800_000, 10**17, 1_795_601_965_666]
    values += [r.randrange(0, 253_402_300_800_000) for _ in range(3000)]
    values += [r.randrange(-10**13, 10**18) for _ in range(500)]
    values += [d * 86_400_000 + r.choice([0, 999, 1000, 86_399_999]) for d in
               r.sample(range(0, 2_932_896), 300)]
    got = iso_times(values)
    assert got == {ms: iso_ms(ms) for ms in set(values)}


def test_compacted_lines_escape_paths_unless_told_they_are_plain() -> None:
    """Rows of referenced SSTs, from the columns: the encoder's text, with paths escaped
    unless the view found them plain (and plain_json finds exactly those)."""
    when = {7: '7, "last_modified": ' + json.dumps("1970-01-01T00:00:00Z")}
    why = {"m 1 as L0 view": json.dumps("m 1 as L0 view"), None: ""}
    for paths in (["db/compacted/A.sst", "db/compacted/B.sst"],
                  ["db/compacted/A.sst", 'db/c\u00e9/"x"\\\n.sst']):
        want = [ls_cmd.json_line(
            {"path": p, "kind": "compacted", "size": s, "last_modified_ms": 7,
             "last_modified": "1970-01-01T00:00:00Z", "referenced_by": ["m 1 as L0 view"]})
            for p, s in zip(paths, [0, 2**40], strict=True)]
        for plain in ([False, True] if plain_json(paths) else [False]):
            got = ls_cmd._compacted_lines(paths, [0, 2**40], [7, 7], ["m 1 as L0 view"] * 2,
                                          when, why, plain)
            assert got == want
    assert plain_json(["db/compacted/", "x~y.sst"])
    for bad in ('a"b', "a\\b", "a\x7fb", "a\x1fb", "\u00e9"):
        assert not plain_json(["db/", bad])

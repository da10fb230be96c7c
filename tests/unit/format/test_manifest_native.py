"""The native manifest codec (slatelib._manifest) against the pure-Python reference.

Encode: the same bytes for random manifests, golden manifests and large ones (vtable sharing
across thousands of tables). Decode: the same objects, and the native readers never accept
what the reference rejects (raw native results on fuzzed and truncated buffers). The
wrapper's errors are the reference's, with the path. The reference path runs in a
``SLATELIB_NO_NATIVE=1`` subprocess too.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slatelib.core.manifest import (
    Checkpoint,
    CompressionCodec,
    FilterFormat,
    Manifest,
    SortedRun,
    SsTableInfo,
    SstHandle,
    SstType,
    SstView,
)
from slatelib.core.ranges import Bound, BytesRange
from slatelib.errors import CorruptObjectError, DataError, InvalidArgumentError
from slatelib.format import manifest_codec, manifest_native
from slatelib.format.flatbuf import Buffer
from slatelib.format.manifest_codec import (
    decode_manifest,
    decode_manifest_py,
    encode_manifest,
    encode_manifest_py,
)
from slatelib.format.manifest_parts import view_problem
from slatelib.ids import Ulid
from tests.conftest import FIXTURE_NAMES, GOLDEN_DIR
from tests.unit.native_only import require_native

from ._strategies import manifests

REPO = Path(__file__).resolve().parents[3]
ext = manifest_native.ext
DIFF = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def native_built() -> None:
    """Without the extension these equivalence checks cannot run: a failure, not a skip."""
    require_native(ext is not None, "slatelib._manifest")


def _native_raw(data: bytes) -> Manifest:
    """The native decoder without the wrapper's fallback to the reference."""
    assert ext is not None
    return manifest_codec._decode_v2(Buffer(data, start=2).root(),
                                     manifest_codec._NativeTrees(ext))


def _same_objects(a: Manifest, b: Manifest) -> None:
    """Equal, and equal in the types of every handle, info and view field too."""
    assert a == b
    for x, y in zip(a.ssts, b.ssts, strict=True):
        assert type(x) is type(y) is SstHandle
        assert type(x.info) is type(y.info) is SsTableInfo
        for f in dataclasses.fields(SsTableInfo):
            assert type(getattr(x.info, f.name)) is type(getattr(y.info, f.name)), f.name
        assert type(x.format_version) is type(y.format_version)
        assert type(x.id) is type(y.id)
    assert type(a.ssts) is type(b.ssts) is tuple
    for va, vb in zip(a.all_views(), b.all_views(), strict=True):
        assert type(va) is type(vb) is SstView
        assert type(va.id) is type(vb.id) is int
    for ra, rb in zip(a.compacted, b.compacted, strict=True):
        assert type(ra) is type(rb) is SortedRun
        assert type(ra.views) is type(rb.views) is tuple
    assert dict(a.sst_map) == {h.id: h for h in b.ssts}


def _big(n: int, runs: int, *, ranged_every: int = 0) -> Manifest:
    ssts: list[SstHandle] = []
    run_views: list[SortedRun] = []
    for r in range(runs):
        views = []
        for j in range(n // runs):
            sid = Ulid((0x0190 << 112) + (len(ssts) << 20) + r)
            first, last = b"k%06d" % (2 * j), b"k%06d" % (2 * j + 1)
            info = SsTableInfo(first, last if j % 7 else None, 4000 + j, 100 + (j % 3), 3000,
                               200, CompressionCodec(j % 5), SstType.COMPACTED,
                               j % 2 * (4100 + j), 60, FilterFormat(j % 2))
            ssts.append(SstHandle(sid, info, None if j % 11 == 0 else 2))
            rng = None
            if ranged_every and j % ranged_every == 0:
                rng = BytesRange(Bound.included(first), Bound.excluded(first + b"\xff"))
            views.append(SstView(Ulid(sid + 1) if j % 3 == 0 else sid, sid, rng))
        run_views.append(SortedRun(r, tuple(views)))
    l0 = run_views.pop()
    return Manifest(ssts=tuple(sorted(ssts, key=lambda h: h.id)), l0=l0.views,
                    compacted=tuple(run_views), writer_epoch=7, last_l0_seq=99)


# ------------------------------------------------------------------------------ encode

@DIFF
@given(manifests())
def test_native_encode_writes_the_reference_bytes(m: Manifest) -> None:
    assert ext is not None
    assert ext.encode_v2(m, view_problem, 0) == encode_manifest_py(m)


@pytest.mark.parametrize("ranged_every", [0, 5])
def test_native_encode_of_a_large_manifest_writes_the_reference_bytes(ranged_every: int) -> None:
    m = _big(3000, 6, ranged_every=ranged_every)
    data = encode_manifest(m)
    assert data == encode_manifest_py(m)
    _same_objects(decode_manifest(data), decode_manifest_py(data))
    _same_objects(_native_raw(data), m)


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_native_codec_reproduces_every_official_manifest(fixture: str) -> None:
    for path in sorted((GOLDEN_DIR / fixture / "manifest").iterdir()):
        data = path.read_bytes()
        if data[:2] != b"\x00\x02":
            continue
        native = _native_raw(data)
        _same_objects(native, decode_manifest_py(data))
        assert ext is not None
        assert ext.encode_v2(native, view_problem, 0) == data


@pytest.mark.parametrize("change", [
    {"writer_epoch": -1}, {"last_l0_seq": 1 << 64}, {"last_l0_clock_tick": 1 << 63},
    {"destroyed_at_s": -5}, {"writer_epoch": 1.5},
])
def test_native_encode_refuses_what_the_reference_refuses(change: dict[str, object]) -> None:
    m = dataclasses.replace(_big(20, 2), **change)  # type: ignore[arg-type]
    assert ext is not None
    with pytest.raises((ValueError, TypeError, OverflowError)):
        ext.encode_v2(m, view_problem, 0)
    with pytest.raises(InvalidArgumentError) as native_err:
        encode_manifest(m)
    with pytest.raises(InvalidArgumentError) as py_err:
        encode_manifest_py(m)
    assert str(native_err.value) == str(py_err.value)


def _with_handle(m: Manifest, i: int, **info: object) -> Manifest:
    h = m.ssts[i]
    bad = SstHandle(h.id, dataclasses.replace(h.info, **info), h.format_version)  # type: ignore[arg-type]
    return dataclasses.replace(m, ssts=m.ssts[:i] + (bad,) + m.ssts[i + 1:])


@pytest.mark.parametrize("bad", [
    lambda m: _with_handle(m, 3, index_len=-1),
    lambda m: _with_handle(m, 3, stats_len=1 << 64),
    lambda m: _with_handle(m, 3, compression=9),
    lambda m: _with_handle(m, 3, first_entry=None),
    lambda m: _with_handle(m, 3, first_entry=b"zz", last_entry=b"a"),
    lambda m: dataclasses.replace(m, ssts=m.ssts[1:]),  # a view without its SST
    lambda m: dataclasses.replace(m, compacted=(SortedRun(1 << 32, ()),)),
    lambda m: dataclasses.replace(m, l0=(SstView(Ulid(-1), m.ssts[0].id),)),
    lambda m: dataclasses.replace(m, l0=(SstView(
        m.l0[0].id, m.l0[0].sst_id, BytesRange(Bound.excluded(b"a"), Bound.unbounded())),)),
    lambda m: dataclasses.replace(m, segment_extractor_name="\udcff"),
])
def test_encode_errors_are_the_reference_errors(bad: object) -> None:
    m = bad(_big(40, 2))  # type: ignore[operator]
    with pytest.raises(InvalidArgumentError) as py_err:
        encode_manifest_py(m)
    with pytest.raises(InvalidArgumentError) as err:
        encode_manifest(m)
    assert str(err.value) == str(py_err.value)


def _bump(m: Manifest, i: int) -> Manifest:
    """What a checkpoint create or a writer fence changes: not the tree."""
    cp = Checkpoint(uuid.UUID(int=i + 1), i, None, 1_700_000_000 + i)
    return dataclasses.replace(m, checkpoints=(*m.checkpoints, cp), writer_epoch=m.writer_epoch + 1)


def test_an_unchanged_tree_is_reused_by_encode_and_decode() -> None:
    m = _big(3000, 3)
    for i in range(3):
        data = encode_manifest(m)
        assert data == encode_manifest_py(m)
        decoded = decode_manifest(data)
        _same_objects(decoded, decode_manifest_py(data))
        assert decoded.ssts is m.ssts and decoded.compacted is m.compacted  # reused
        m = _bump(decoded, i)
    # A new tree (one SST less) is encoded and decoded in full, and kept from then on.
    smaller = m.with_trees(compacted=m.compacted[:1])  # still over 1024 SSTs
    data = encode_manifest(smaller)
    assert data == encode_manifest_py(smaller)
    _same_objects(decode_manifest(data), decode_manifest_py(data))
    assert decode_manifest(encode_manifest(_bump(smaller, 9))).ssts is smaller.ssts


_BASE = _big(1100, 2)
_OUTSIDE_THE_TREE = ("checkpoints", "external_dbs", "initialized", "writer_epoch",
                     "compactor_epoch", "replay_after_wal_id", "wal_id_last_seen",
                     "last_l0_clock_tick", "last_l0_seq", "recent_snapshot_min_seq",
                     "sequence_tracker", "segment_extractor_name", "manifest_id_field",
                     "destroyed_at_s")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(manifests(), st.sampled_from([None, ()]))
def test_reused_trees_give_the_reference_bytes_and_objects(r: Manifest, segments: object) -> None:
    """A kept tree under random everything-else: the bytes and objects of the reference."""
    encode_manifest(_BASE)  # keep the base tree
    m = dataclasses.replace(_BASE, segments=segments,  # type: ignore[arg-type]
                            **{f: getattr(r, f) for f in _OUTSIDE_THE_TREE})
    data = encode_manifest(m)
    assert data == encode_manifest_py(m)
    decoded = decode_manifest(data)
    assert decoded.ssts is _BASE.ssts
    _same_objects(decoded, decode_manifest_py(data))


def test_a_tree_is_not_reused_when_its_bytes_differ() -> None:
    m = _big(1200, 3)
    data = encode_manifest(m)
    for back in range(8, 4000, 97):  # bytes of the kept section (it ends the buffer)
        mangled = bytearray(data)
        mangled[len(data) - back] ^= 0x01
        try:
            decoded = decode_manifest(bytes(mangled))
        except DataError:
            continue
        assert decoded.ssts is not m.ssts
        _same_objects(decoded, decode_manifest_py(bytes(mangled)))
    assert decode_manifest(data).ssts is m.ssts


def test_a_tree_of_non_canonical_objects_is_not_kept() -> None:
    m = _big(1200, 3)
    first = m.ssts[0]
    odd = SstHandle(first.id, first.info, True)  # a bool, not an int
    m = dataclasses.replace(m, ssts=(odd, *m.ssts[1:]))
    data = encode_manifest(m)
    assert data == encode_manifest_py(m)
    decoded = decode_manifest(data)
    assert decoded.ssts is not m.ssts
    assert type(decoded.ssts[0].format_version) is int
    _same_objects(decoded, decode_manifest_py(data))
    assert ext is not None
    ext.forget_tree()
    assert decode_manifest(encode_manifest(_big(1200, 3))).ssts is not m.ssts


# ------------------------------------------------------------------------------ decode

@DIFF
@given(manifests())
def test_native_decode_returns_the_reference_objects(m: Manifest) -> None:
    data = encode_manifest_py(m)
    _same_objects(_native_raw(data), decode_manifest_py(data))
    _same_objects(decode_manifest(data), decode_manifest_py(data))


def _reference_outcome(data: bytes) -> Manifest | str:
    try:
        return decode_manifest_py(data, path="x/manifest/00000000000000000007.manifest")
    except DataError as exc:
        return f"{type(exc).__name__}: {exc}"


def _check_agreement(data: bytes) -> None:
    """The native readers accept only what the reference accepts, with the same result; the
    wrapper's outcome (result or error text, path included) is the reference's."""
    expected = _reference_outcome(data)
    try:
        raw: Manifest | None = _native_raw(data)
    except Exception:  # noqa: BLE001 - any refusal is fine: the wrapper falls back
        raw = None
    if raw is not None:
        assert isinstance(expected, Manifest), f"native accepted what the reference refuses: {expected}"
        _same_objects(raw, expected)
    try:
        got: Manifest | str = decode_manifest(data, path="x/manifest/00000000000000000007.manifest")
    except DataError as exc:
        got = f"{type(exc).__name__}: {exc}"
    assert got == expected
    if isinstance(expected, str):
        assert "x/manifest/00000000000000000007.manifest" in expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(manifests(), st.data())
def test_mangled_buffers_get_the_reference_outcome(m: Manifest, data: st.DataObject) -> None:
    raw = bytearray(encode_manifest_py(m))
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(2, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    _check_agreement(bytes(raw))


def test_every_truncation_gets_the_reference_outcome() -> None:
    data = encode_manifest(_big(12, 3, ranged_every=2))
    for n in range(2, len(data)):
        _check_agreement(data[:n])


@pytest.mark.parametrize("fixture", ["basic", "ckpt_clone_proj", "segmented"])
def test_mangled_official_manifests_get_the_reference_outcome(fixture: str) -> None:
    path = sorted((GOLDEN_DIR / fixture / "manifest").iterdir())[-1]
    data = path.read_bytes()
    for pos in range(2, len(data)):
        for value in (0x00, 0xFF, data[pos] ^ 0x01):
            mangled = bytearray(data)
            mangled[pos] = value
            _check_agreement(bytes(mangled))


def test_corrupt_view_range_raises_the_reference_error_with_the_path() -> None:
    m = _big(12, 3, ranged_every=2)
    data = bytearray(encode_manifest(m))
    # Make one view's range end before its start: the range decodes, view_problem refuses.
    rng = m.l0[0].visible_range
    assert rng is not None and rng.end.key is not None
    key = rng.end.key
    at = bytes(data).index(key)
    data[at] = 0
    with pytest.raises(CorruptObjectError) as py_err:
        decode_manifest_py(bytes(data), path="db/manifest/1.manifest")
    with pytest.raises(CorruptObjectError) as err:
        decode_manifest(bytes(data), path="db/manifest/1.manifest")
    assert str(err.value) == str(py_err.value)
    assert "db/manifest/1.manifest" in str(err.value)


def test_decoded_objects_are_collected_and_usable() -> None:
    m = _big(2000, 4)
    data = encode_manifest(m)
    assert ext is not None
    ext.forget_tree()  # decoded, not the objects encoded above
    decoded = decode_manifest(data)
    # Untracked by the cyclic GC (they cannot be part of a cycle) yet ordinary objects:
    # hashable, comparable, replaceable.
    h = decoded.ssts[5]
    assert not gc.is_tracked(h) and not gc.is_tracked(h.info)
    assert hash(h) == hash(m.ssts[5]) and h == m.ssts[5]
    assert dataclasses.replace(h, format_version=3).format_version == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        h.id = Ulid(1)  # type: ignore[misc]
    assert decoded.sst(h.id) is h
    del decoded, h
    gc.collect()


# ------------------------------------------------------------------------- pure Python

def test_no_native_turns_the_manifest_extension_off() -> None:
    """SLATELIB_NO_NATIVE=1 turns the extension off (``make test-pure`` runs the codec tests,
    and the whole unit suite, on the reference path alone)."""
    env = dict(os.environ, SLATELIB_NO_NATIVE="1")
    probe = subprocess.run(
        [sys.executable, "-c",
         "from slatelib.format import manifest_native as m; print(m.HAVE_NATIVE)"],
        cwd=REPO, env=env, capture_output=True, text=True, check=True,
    )
    assert probe.stdout.strip() == "False"


# ------------------------------------------------------------ planning helpers
def test_ulid_names_equal_ulid_to_str_on_random_ids() -> None:
    import random

    from slatelib.ids import ULID_MAX, ulid_to_str

    assert ext is not None
    r = random.Random(17)
    ids = [0, 1, ULID_MAX, 1 << 64, (1 << 64) - 1, 1 << 125] + [
        r.getrandbits(r.randint(1, 128)) for _ in range(5000)]
    assert ext.ulid_names("db/compacted/", ".sst", ids) == [
        f"db/compacted/{ulid_to_str(i)}.sst" for i in ids]
    assert ext.ulid_names("", "", []) == []
    for bad in (-1, ULID_MAX + 1):
        with pytest.raises(OverflowError):
            ext.ulid_names("", "", [bad])
    with pytest.raises(TypeError):
        ext.ulid_names("", "", ["01ARZ3NDEKTSV4RRFFQ69G5FAV"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="ASCII"):
        ext.ulid_names("bücher/", "", [1])


def test_untrack_frozen_untracks_only_the_given_classes_through_their_fields() -> None:
    assert ext is not None
    shared = Bound.included(b"a")
    rngs = [BytesRange(shared, Bound.excluded(b"z%d" % i)) for i in range(100)]
    holder = [SstView(Ulid(i), Ulid(i), r) for i, r in enumerate(rngs)]
    assert all(gc.is_tracked(r) and gc.is_tracked(r.end) for r in rngs)
    # The views are not of the given classes: neither they nor what they hold are touched.
    assert ext.untrack_frozen(holder, (BytesRange, Bound)) == 0
    assert all(gc.is_tracked(r) for r in rngs)
    # Ranges and their bounds (the shared one once), not the BoundKind members they hold.
    assert ext.untrack_frozen(list(rngs), (BytesRange, Bound)) == 100 + 100 + 1
    assert not any(gc.is_tracked(r) or gc.is_tracked(r.end) for r in rngs)
    assert not gc.is_tracked(shared) and gc.is_tracked(shared.kind)
    assert rngs[5] == BytesRange(Bound.included(b"a"), Bound.excluded(b"z5"))  # still intact
    assert ext.untrack_frozen(list(rngs), (BytesRange, Bound)) == 0
    with pytest.raises(TypeError):
        ext.untrack_frozen(rngs, (BytesRange, "Bound"))  # type: ignore[arg-type]

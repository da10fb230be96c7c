"""The native compactions-file codec (slatelib._manifest) against the pure-Python reference.

Encode: the same bytes for random files (version 1 and 2, worker specs, drain-segment
specs, contexts with subcompactions, many outputs), every official golden file and large
ones. Decode: the same objects, and the native readers never accept what the reference
rejects (raw native results on mangled and truncated buffers); the wrapper's outcome,
error class and text included, is the reference's. A test proves the native path ran.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slatelib.core.compactions import (
    CompactedSsTable,
    Compaction,
    Compactions,
    CompactionStatus,
    DrainSegmentSpec,
    Subcompaction,
    TieredCompactionContext,
    TieredCompactionSpec,
    WorkerSpec,
)
from slatelib.core.manifest import CompressionCodec, FilterFormat, SsTableInfo, SstType
from slatelib.core.ranges import Bound, BytesRange
from slatelib.errors import DataError
from slatelib.format import compactions_codec, manifest_native
from slatelib.format.compactions_codec import (
    decode_compactions,
    decode_compactions_py,
    encode_compactions,
    encode_compactions_py,
)
from slatelib.format.flatbuf import Buffer
from slatelib.ids import Ulid
from tests.conftest import FIXTURE_NAMES, GOLDEN_DIR
from tests.unit.native_only import require_native

from ._strategies import compactions_files, compactions_v2, infos, ranges, texts, u64s, ulids

ext = manifest_native.ext
DIFF = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GOLDEN_FILES = sorted(
    p for name in FIXTURE_NAMES if (GOLDEN_DIR / name / "compactions").is_dir()
    for p in (GOLDEN_DIR / name / "compactions").iterdir())


@pytest.fixture(autouse=True)
def native_built() -> None:
    """Without the extension these equivalence checks cannot run: a failure, not a skip."""
    require_native(ext is not None, "slatelib._manifest")


# --------------------------------------------------------------------------- helpers
def _native_encode(c: Compactions) -> bytes:
    """The native encoder without the wrapper's fallback to the reference."""
    assert ext is not None
    return ext.encode_compactions(c, 0)


def _native_decode(data: bytes) -> Compactions:
    """The native decoder without the wrapper's fallback to the reference."""
    assert ext is not None
    version = compactions_codec._check_prefix(data, None)
    return compactions_codec._decode(Buffer(data, start=2).root(), version,
                                     compactions_codec._NativeVectors(ext))


def _outputs(c: Compactions) -> list[CompactedSsTable]:
    out: list[CompactedSsTable] = []
    for x in c.recent_compactions:
        out.extend(x.output_ssts)
        if x.ctx is not None:
            for s in x.ctx.subcompactions:
                out.extend(s.output_ssts)
    return out


def _same_objects(a: Compactions, b: Compactions) -> None:
    """Equal, and equal in the types of every output-SST and id field too."""
    assert a == b
    for x, y in zip(_outputs(a), _outputs(b), strict=True):
        assert type(x) is type(y) is CompactedSsTable
        assert type(x.id) is type(y.id) is int
        assert type(x.info) is type(y.info) is SsTableInfo
        for f in dataclasses.fields(SsTableInfo):
            assert type(getattr(x.info, f.name)) is type(getattr(y.info, f.name)), f.name
        assert type(x.format_version) is type(y.format_version)
        assert type(x.visible_range) is type(y.visible_range)
    for p, q in zip(a.recent_compactions, b.recent_compactions, strict=True):
        assert type(p.output_ssts) is type(q.output_ssts) is tuple
        assert type(p.spec.l0_view_ids) is type(q.spec.l0_view_ids) is tuple
        assert all(type(i) is int for i in p.spec.l0_view_ids)
        if isinstance(p.spec, TieredCompactionSpec):
            assert isinstance(q.spec, TieredCompactionSpec)
            assert type(p.spec.ssts) is type(q.spec.ssts) is tuple


def _info(j: int) -> SsTableInfo:
    first = b"k%07d" % j
    return SsTableInfo(first, first + b"~" if j % 7 else None, 4000 + j, 100 + j % 3, 3000,
                       200 * (j % 2), CompressionCodec(j % 5), SstType.COMPACTED,
                       (j % 2) * (4100 + j), 60, FilterFormat(j % 2))


def _big(n: int, *, ranged_every: int = 0, version: int = 2) -> Compactions:
    """One running compaction with n outputs and n L0 view ids, a context with three
    subcompactions, a worker, and a few small compactions around it."""
    def out(j: int) -> CompactedSsTable:
        rng = None
        if ranged_every and j % ranged_every == 0:
            rng = BytesRange(Bound.included(b"k%07d" % j), Bound.excluded(b"k%07d~" % j))
        return CompactedSsTable(Ulid((0x0190 << 112) + (j << 20) + 7), _info(j), rng,
                                None if j % 11 == 0 else 2)

    outputs = tuple(out(j) for j in range(n))
    subs = (Subcompaction(BytesRange.half_open(None, b"k0000100"), outputs[:n // 3]),
            Subcompaction(BytesRange.half_open(b"k0000100", b"k0000200")),
            Subcompaction(BytesRange.half_open(b"k0000200", None), outputs[n // 3:n // 2]))
    runs = (9, 4, 6)
    big = Compaction(
        Ulid(0x0191 << 112),
        TieredCompactionSpec(l0_view_ids=tuple(Ulid((0x0192 << 112) + j) for j in range(n)),
                             sorted_runs=runs, destination=4),
        CompactionStatus.RUNNING, outputs, WorkerSpec("01JWORKER0000000000000000X", 17_000),
        TieredCompactionContext(subs, 12345))
    small = (
        Compaction(Ulid(5), TieredCompactionSpec(sorted_runs=(3,), destination=3,
                                                 segment=None, ssts=(Ulid(8), Ulid(9)))),
        Compaction(Ulid(6), DrainSegmentSpec(b"seg1", (Ulid(10),), (2, 1)),
                   CompactionStatus.COMPLETED, outputs[:3]),
        Compaction(Ulid(7), TieredCompactionSpec(), CompactionStatus.FAILED),
    )
    return Compactions(42, (big, *small), format_version=version)


def _as_v1(c: Compactions) -> Compactions:
    """What version 1 can express: each tiered destination is the smallest input run."""
    def fix(x: Compaction) -> Compaction:
        if isinstance(x.spec, TieredCompactionSpec):
            spec = dataclasses.replace(x.spec, destination=min(x.spec.sorted_runs, default=0))
            return dataclasses.replace(x, spec=spec)
        return x
    return dataclasses.replace(c, recent_compactions=tuple(fix(x) for x in c.recent_compactions),
                               format_version=1)


many_outputs = st.lists(
    st.builds(CompactedSsTable, id=ulids, info=infos, visible_range=st.none() | ranges,
              format_version=st.none() | st.integers(0, 2**16 - 1)),
    min_size=3, max_size=40).map(tuple)
# Beyond compactions_files: more outputs (vtables shared across many tables), workers
# always set, drain specs and subcompaction contexts in every status.
wide_compactions = st.builds(
    Compaction, id=ulids,
    spec=st.one_of(st.builds(TieredCompactionSpec, l0_view_ids=st.lists(ulids, max_size=30)
                             .map(tuple), sorted_runs=st.lists(st.integers(0, 2**32 - 1),
                                                               max_size=4).map(tuple),
                             destination=st.integers(0, 2**32 - 1),
                             segment=st.none() | st.binary(max_size=3),
                             ssts=st.lists(ulids, max_size=5).map(tuple)),
                   st.builds(DrainSegmentSpec, st.binary(min_size=0, max_size=3),
                             st.lists(ulids, max_size=5).map(tuple))),
    status=st.sampled_from(CompactionStatus), output_ssts=many_outputs,
    worker=st.builds(WorkerSpec, texts, u64s),
    ctx=st.none() | st.builds(TieredCompactionContext, st.lists(
        st.builds(Subcompaction, ranges, many_outputs), max_size=3).map(tuple), u64s))
any_files = st.one_of(
    compactions_files,
    compactions_files.map(_as_v1),
    st.builds(Compactions, u64s, st.lists(st.one_of(wide_compactions, compactions_v2),
                                          max_size=4).map(tuple),
              st.sampled_from([1, 2])).map(lambda c: _as_v1(c) if c.format_version == 1 else c),
)


# ------------------------------------------------------------------------------ encode
@DIFF
@given(any_files)
def test_native_encode_writes_the_reference_bytes(c: Compactions) -> None:
    assert _native_encode(c) == encode_compactions_py(c)
    assert encode_compactions(c) == encode_compactions_py(c)


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_native_codec_reproduces_every_official_compactions_file(path: Path) -> None:
    data = path.read_bytes()
    native = _native_decode(data)
    _same_objects(native, decode_compactions_py(data))
    assert _native_encode(native) == data


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("ranged_every", [0, 5])
def test_native_codec_of_a_large_file_gives_the_reference_bytes_and_objects(
        version: int, ranged_every: int) -> None:
    c = _big(2000, ranged_every=ranged_every, version=version)
    data = encode_compactions(c)
    assert data[:2] == bytes([0, version])
    assert data == encode_compactions_py(c)
    _same_objects(_native_decode(data), c)
    _same_objects(decode_compactions(data), decode_compactions_py(data))


def _outcome(fn: Callable[[], object]) -> object:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - compared between the two paths
        return f"{type(exc).__name__}: {exc}"


def _replace_big(**change: object) -> Compactions:
    c = _big(30)
    return dataclasses.replace(c, recent_compactions=(
        dataclasses.replace(c.recent_compactions[0], **change),  # type: ignore[arg-type]
        *c.recent_compactions[1:]))


def _with_output(**change: object) -> Compactions:
    c = _big(30)
    big = c.recent_compactions[0]
    outs = list(big.output_ssts)
    outs[4] = dataclasses.replace(outs[4], **change)  # type: ignore[arg-type]
    return _replace_big(output_ssts=tuple(outs))


def _with_info(**change: object) -> Compactions:
    return _with_output(info=dataclasses.replace(_info(4), **change))  # type: ignore[arg-type]


_EMPTY = BytesRange(Bound.excluded(b"a"), Bound.included(b"a"))  # 0.17.0 cannot read it


@pytest.mark.parametrize("bad", [
    lambda: dataclasses.replace(_big(30), compactor_epoch=-1),
    lambda: dataclasses.replace(_big(30), compactor_epoch=1 << 64),
    lambda: dataclasses.replace(_big(30), format_version=3),
    lambda: dataclasses.replace(_big(30), format_version=2.0),  # type: ignore[arg-type]
    lambda: dataclasses.replace(_big(30, version=1)),  # destination 4, smallest run 4: fine
    lambda: _replace_big(spec=TieredCompactionSpec(sorted_runs=(2, 5), destination=5)),
    lambda: dataclasses.replace(_replace_big(spec=TieredCompactionSpec(
        sorted_runs=(2, 5), destination=5)), format_version=1),
    lambda: _replace_big(spec=TieredCompactionSpec(sorted_runs=(1 << 32,))),
    lambda: _replace_big(spec=TieredCompactionSpec(sorted_runs=(-1,))),
    lambda: _replace_big(spec=TieredCompactionSpec(destination=1 << 32)),
    lambda: _replace_big(spec=TieredCompactionSpec(l0_view_ids=(Ulid(1 << 128),))),
    lambda: _replace_big(spec=TieredCompactionSpec(ssts=(Ulid(-2),))),
    lambda: _replace_big(spec=DrainSegmentSpec(None)),  # type: ignore[arg-type]
    lambda: _replace_big(spec="tiered"),
    lambda: _replace_big(status=9),
    lambda: _replace_big(status=-1),
    lambda: _replace_big(status=2),  # an int equal to a status: accepted by both
    lambda: _replace_big(status="RUNNING"),
    lambda: _replace_big(id=-1),
    lambda: _replace_big(worker=WorkerSpec("\udcff", 1)),
    lambda: _replace_big(worker=WorkerSpec("w", -1)),
    lambda: _replace_big(ctx=TieredCompactionContext((), 1 << 64)),
    lambda: _replace_big(ctx=TieredCompactionContext((Subcompaction(_EMPTY),), 0)),
    lambda: _with_output(visible_range=_EMPTY),
    lambda: _with_output(format_version=1 << 16),
    lambda: _with_output(format_version=-1),
    lambda: _with_output(id=1 << 128),
    lambda: _with_info(index_len=-1),
    lambda: _with_info(stats_len=1 << 64),
    lambda: _with_info(compression=9),
    lambda: _with_info(first_entry="text"),
])
def test_native_encode_refuses_what_the_reference_refuses(bad: Callable[[], Compactions]) -> None:
    """Each value: the native encoder refuses it or writes the reference's bytes, and the
    wrapper's outcome (bytes, or error class and text) is the reference's."""
    c = bad()
    expected = _outcome(lambda: encode_compactions_py(c))
    raw = _outcome(lambda: _native_encode(c))
    if isinstance(raw, bytes):
        assert raw == expected, "native accepted what the reference refuses, or differs"
    assert _outcome(lambda: encode_compactions(c)) == expected


# ------------------------------------------------------------------------------ decode
@DIFF
@given(any_files)
def test_native_decode_returns_the_reference_objects(c: Compactions) -> None:
    data = encode_compactions_py(c)
    _same_objects(_native_decode(data), decode_compactions_py(data))
    _same_objects(decode_compactions(data), c)


PATH = "db/compactions/00000000000000000007.compactions"


def _check_agreement(data: bytes) -> None:
    """The native readers accept only what the reference accepts, with the same result; the
    wrapper's outcome (result, or error class and text with the path) is the reference's."""
    try:
        expected: Compactions | str = decode_compactions_py(data, path=PATH)
    except DataError as exc:
        expected = f"{type(exc).__name__}: {exc}"
        assert PATH in expected
    try:
        raw: Compactions | None = _native_decode(data)
    except Exception:  # noqa: BLE001 - any refusal is fine: the wrapper falls back
        raw = None
    if raw is not None:
        assert isinstance(expected, Compactions), f"native accepted what the reference refuses: {expected}"
        _same_objects(raw, expected)
    try:
        got: Compactions | str = decode_compactions(data, path=PATH)
    except DataError as exc:
        got = f"{type(exc).__name__}: {exc}"
    assert got == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_files, st.data())
def test_mangled_buffers_get_the_reference_outcome(c: Compactions, data: st.DataObject) -> None:
    raw = bytearray(encode_compactions_py(c))
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(2, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    _check_agreement(bytes(raw))


def test_every_truncation_gets_the_reference_outcome() -> None:
    data = encode_compactions(_big(6, ranged_every=2))
    for n in range(len(data) + 1):
        _check_agreement(data[:n])


@pytest.mark.parametrize("name", [
    "basic/00000000000000000008.compactions",  # running, with its worker
    "basic/00000000000000000010.compactions",  # completed, with its output SST
    "ttl_merge/00000000000000000009.compactions",  # compacted
])
def test_every_byte_of_official_files_mangled_gets_the_reference_outcome(name: str) -> None:
    fixture, file = name.split("/")
    data = (GOLDEN_DIR / fixture / "compactions" / file).read_bytes()
    assert decode_compactions_py(data).recent_compactions  # not an empty file
    for pos in range(len(data)):
        for value in (0x00, 0xFF, data[pos] ^ 0x01):
            mangled = bytearray(data)
            mangled[pos] = value
            _check_agreement(bytes(mangled))


def test_mangled_output_ranges_and_ulid_vectors_get_the_reference_outcome() -> None:
    """Every byte of a file whose outputs have visible ranges (decoded by the reference
    through the native reader's callback) and whose specs hold ULID vectors."""
    c = _big(4, ranged_every=2)
    data = encode_compactions_py(dataclasses.replace(c, recent_compactions=(
        dataclasses.replace(c.recent_compactions[0], ctx=None), c.recent_compactions[1])))
    for pos in range(2, len(data)):
        mangled = bytearray(data)
        mangled[pos] ^= 0x04
        _check_agreement(bytes(mangled))


# ----------------------------------------------------------------------- the native path
def test_the_native_path_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the reference disabled, encode and decode still work: the extension did them."""
    c = _big(50, ranged_every=7)
    expected = encode_compactions_py(c)

    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("the reference ran")

    class NoVectors:
        outputs = ulids = refuse

    monkeypatch.setattr(compactions_codec, "encode_compactions_py", refuse)
    monkeypatch.setattr(compactions_codec, "decode_compactions_py", refuse)
    monkeypatch.setattr(compactions_codec, "_PY_VECTORS", NoVectors())
    assert encode_compactions(c) == expected
    decoded = decode_compactions(expected)
    _same_objects(decoded, c)
    # Built by the extension: outputs without a range are not tracked by the cyclic GC
    # (a dataclass instance made in Python is).
    plain = [o for o in decoded.recent_compactions[0].output_ssts if o.visible_range is None]
    assert plain and not any(gc.is_tracked(o) or gc.is_tracked(o.info) for o in plain)
    assert gc.is_tracked(CompactedSsTable(Ulid(1), _info(1)))
    ranged = [o for o in decoded.recent_compactions[0].output_ssts if o.visible_range]
    assert ranged and all(gc.is_tracked(o) for o in ranged)


def test_decoded_outputs_are_ordinary_objects() -> None:
    data = encode_compactions(_big(200))
    out = decode_compactions(data).recent_compactions[0].output_ssts[5]
    assert out == _big(200).recent_compactions[0].output_ssts[5]
    assert hash(out) == hash(_big(200).recent_compactions[0].output_ssts[5])
    assert dataclasses.replace(out, format_version=3).format_version == 3
    assert out.handle().info is out.info
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.id = Ulid(1)  # type: ignore[misc]
    del out
    gc.collect()


def test_without_the_extension_the_reference_writes_and_reads_the_same_file() -> None:
    """SLATELIB_NO_NATIVE=1: the wrappers run the reference (test_manifest_native runs the
    compactions codec tests in that mode too); bytes and objects are those of this process."""
    data = encode_compactions(_big(300, ranged_every=9))
    code = (
        "import sys\n"
        "from slatelib.format import compactions_codec as cc, manifest_native\n"
        "from tests.unit.format.test_compactions_codec_native import _big\n"
        "assert manifest_native.ext is None\n"
        "data = sys.stdin.buffer.read()\n"
        "c = _big(300, ranged_every=9)\n"
        "assert cc.decode_compactions(data) == c\n"
        "sys.stdout.buffer.write(cc.encode_compactions(c))\n"
    )
    env = dict(os.environ, SLATELIB_NO_NATIVE="1")
    out = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True,
                         env=env, cwd=Path(__file__).resolve().parents[3], check=False)
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    assert out.stdout == data

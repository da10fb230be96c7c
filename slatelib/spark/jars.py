"""The JVM jars of slatelib's Spark jobs: pinned, fetched with the machine's Maven, checked
by SHA-256, and put on the classpath when a job starts its driver JVM.

What is pinned is ``slatelib/spark/jars.lock`` (coordinates, SHA-256, feature):

- ``delta``: ``delta-spark`` and ``delta-storage``, the release built for the pinned
  PySpark's Spark and Scala versions. With them the export writes Delta with Spark's own
  writer and merges incrementally on the executors (:mod:`slatelib.spark.export`).
- ``s3a``: ``hadoop-aws`` for the Hadoop inside PySpark, its AWS SDK v2 ``bundle`` and the
  S3 analytics accelerator: Spark's Parquet and Delta writers on ``s3://``/``s3a://``
  targets. The bundle is large (about 690 MB) and every executor of an application fetches
  what ``spark.jars`` lists, so jobs ask for this feature only when a target is on S3.

``python -m slatelib.spark.jars fetch`` (``make jars``, run by ``make install``) copies the
jars with ``mvn dependency:copy`` from whatever Maven the machine is set up with (its
``settings.xml``, mirrors and ``~/.m2`` cache; no repository is named here) into
:func:`default_dir` (``build/jars`` of a checkout, or ``$SLATELIB_SPARK_JARS_DIR``), and
refuses a jar whose checksum differs from the lock. ``python -m slatelib.spark.jars print``
prints the ``--jars`` value for ``spark-submit``, ``packages`` the ``--packages`` value.

When a job starts its own driver JVM (``slate-spark``, ``python jobs/...``, the test
session), :func:`slatelib.spark.session.build_spark` adds the fetched jars of the features it
is asked for to the launch (``--jars``, merged with any the user gave). Under
``spark-submit`` the JVM is already running, so the jars come from its ``--jars`` or
``--packages`` (docs/guides/cluster.md, "Jars"); the export falls back to delta-rs when delta-spark's classes
are not loadable.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from slatelib.errors import InvalidArgumentError, SlateError

FEATURES = ("delta", "s3a")
JARS_DIR_ENV = "SLATELIB_SPARK_JARS_DIR"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
PROBE_CLASSES = {"delta": DELTA_EXTENSION, "s3a": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
"""A class per feature whose presence in the driver JVM tells the feature's jars loaded."""
PACKAGES = {"delta": ("io.delta:delta-spark_2.13",), "s3a": ("org.apache.hadoop:hadoop-aws",)}
"""The coordinates ``--packages`` needs per feature (Ivy resolves the rest transitively)."""


@dataclass(frozen=True)
class Jar:
    """One pinned jar."""

    group: str
    artifact: str
    version: str
    sha256: str
    feature: str

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def filename(self) -> str:
        """The name ``mvn dependency:copy`` gives the jar."""
        return f"{self.artifact}-{self.version}.jar"


def parse_lock(text: str, *, source: str = "jars.lock") -> tuple[Jar, ...]:
    """The jars of a lock file's text (``group:artifact:version sha256 feature`` per line;
    ``#`` comments and blank lines skipped).

    Raises:
        InvalidArgumentError: a malformed line (named by ``source`` and line number), an
            unknown feature or a repeated artifact.
    """
    jars: list[Jar] = []
    seen: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        where = f"{source} line {number}"
        if len(fields) != 3:
            raise InvalidArgumentError(f"{where}: expected 'group:artifact:version sha256 "
                                       f"feature', got {raw.strip()!r}")
        coords, sha, feature = fields
        parts = coords.split(":")
        if len(parts) != 3 or not all(parts):
            raise InvalidArgumentError(f"{where}: bad Maven coordinates {coords!r}")
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise InvalidArgumentError(f"{where}: {sha!r} is not a lower-case SHA-256")
        if feature not in FEATURES:
            raise InvalidArgumentError(f"{where}: unknown feature {feature!r} "
                                       f"(one of {', '.join(FEATURES)})")
        if parts[1] in seen:
            raise InvalidArgumentError(f"{where}: {parts[1]} is pinned twice")
        seen.add(parts[1])
        jars.append(Jar(parts[0], parts[1], parts[2], sha, feature))
    return tuple(jars)


def pinned() -> tuple[Jar, ...]:
    """The jars of the shipped ``slatelib/spark/jars.lock``."""
    text = resources.files("slatelib.spark").joinpath("jars.lock").read_text(encoding="utf-8")
    return parse_lock(text)


def check_features(features: Iterable[str]) -> tuple[str, ...]:
    """``features`` as a tuple, each one known.

    Raises:
        InvalidArgumentError: an unknown feature.
    """
    out = tuple(features)
    unknown = [f for f in out if f not in FEATURES]
    if unknown:
        raise InvalidArgumentError(f"unknown jar feature(s) {unknown}; known: {list(FEATURES)}")
    return out


def select(features: Iterable[str], jars: Sequence[Jar] | None = None) -> list[Jar]:
    """The pinned jars of ``features``, in lock order."""
    wanted = set(check_features(features))
    return [j for j in (pinned() if jars is None else jars) if j.feature in wanted]


def default_dir(environ: dict[str, str] | None = None) -> Path:
    """Where the jars are fetched to and looked for: ``$SLATELIB_SPARK_JARS_DIR``, else
    ``build/jars`` beside ``slatelib/`` (a checkout; an installed wheel should set the
    variable)."""
    env = os.environ if environ is None else environ
    given = env.get(JARS_DIR_ENV)
    if given:
        return Path(given).expanduser()
    return Path(__file__).resolve().parents[2] / "build" / "jars"


@dataclass(frozen=True)
class LocalJars:
    """The fetched jars of some features: the paths found, and the jars missing."""

    paths: tuple[Path, ...]
    missing: tuple[Jar, ...]

    @property
    def complete(self) -> bool:
        return not self.missing


def local_jars(features: Iterable[str], directory: Path | None = None,
               jars: Sequence[Jar] | None = None) -> LocalJars:
    """The fetched jars of ``features`` in ``directory`` (default :func:`default_dir`).
    Presence only: the checksums are checked when fetched (:func:`fetch`)."""
    base = default_dir() if directory is None else directory
    found: list[Path] = []
    missing: list[Jar] = []
    for jar in select(features, jars):
        path = base / jar.filename
        (found.append(path) if path.is_file() else missing.append(jar))
    return LocalJars(tuple(found), tuple(missing))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


Runner = Callable[..., Any]


def fetch(directory: Path, jars: Sequence[Jar], *, mvn: str = "mvn",
          run: Runner = subprocess.run, log: Callable[[str], None] = print) -> list[Path]:
    """Make ``directory`` hold every jar of ``jars`` with its pinned checksum: a jar already
    there with the right SHA-256 is kept, any other is copied with ``mvn dependency:copy``
    (the machine's Maven, settings and cache) and checked. Returns the paths.

    Raises:
        SlateError: ``mvn`` is missing or fails (its output included), or a jar's SHA-256
            differs from the lock (the jar is deleted, so nothing unchecked stays).
    """
    directory.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []
    for jar in jars:
        path = directory / jar.filename
        if path.is_file() and sha256_file(path) == jar.sha256:
            out.append(path)
            continue
        if shutil.which(mvn) is None:
            raise SlateError(f"fetching {jar.coordinates}: no {mvn!r} on PATH (install Maven, "
                             f"or put the jars in {directory} yourself)")
        path.unlink(missing_ok=True)
        log(f"jars: fetching {jar.coordinates}")
        proc = run([mvn, "-q", "-B", "dependency:copy", f"-Dartifact={jar.coordinates}",
                    f"-DoutputDirectory={directory}", "-Dmdep.overWriteReleases=true"],
                   capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not path.is_file():
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise SlateError(f"fetching {jar.coordinates} with {mvn} failed "
                             f"(exit {proc.returncode}):\n{tail}")
        got = sha256_file(path)
        if got != jar.sha256:
            path.unlink(missing_ok=True)
            raise SlateError(f"{jar.coordinates}: SHA-256 {got} differs from the pinned "
                             f"{jar.sha256} (slatelib/spark/jars.lock); the jar was deleted")
        out.append(path)
    return out


def packages(features: Iterable[str], jars: Sequence[Jar] | None = None) -> str:
    """The ``spark-submit --packages`` value for ``features`` (pinned versions)."""
    versions = {f"{j.group}:{j.artifact}": j.version for j in (pinned() if jars is None else jars)}
    coords = [f"{c}:{versions[c]}" for f in check_features(features) for c in PACKAGES[f]]
    return ",".join(coords)


def _jars_of(args: Sequence[str]) -> list[str]:
    """The jars a spark-submit argument list gives (``--jars A,B``, ``--jars=A``,
    ``--conf spark.jars=A``), in order."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        value: str | None = None
        if arg == "--jars" and i + 1 < len(args):
            value, i = args[i + 1], i + 1
        elif arg.startswith("--jars="):
            value = arg[len("--jars="):]
        elif arg in ("--conf", "-c") and i + 1 < len(args) and \
                args[i + 1].startswith("spark.jars="):
            value, i = args[i + 1][len("spark.jars="):], i + 1
        elif arg.startswith("--conf=spark.jars="):
            value = arg[len("--conf=spark.jars="):]
        if value:
            out.extend(v for v in value.split(",") if v)
        i += 1
    return out


def with_jars(submit_args: Sequence[str], paths: Sequence[Path],
              given: Sequence[str] = ()) -> list[str]:
    """``submit_args`` with one ``--jars`` at the end listing every jar they (and ``given``,
    the options already in ``PYSPARK_SUBMIT_ARGS``) name, then ``paths`` not among them:
    spark-submit keeps only the last ``--jars``, so nothing the user gave is lost."""
    if not paths:
        return list(submit_args)
    theirs = _jars_of(given) + _jars_of(submit_args)
    names = {Path(p).name for p in theirs}
    union = list(dict.fromkeys([*theirs, *(str(p) for p in paths if p.name not in names)]))
    return [*submit_args, "--jars", ",".join(union)]


def class_loadable(jvm: Any, name: str) -> bool:
    """Whether the driver JVM can load ``name`` through Spark's class loader (the one
    ``--jars`` extends; ``Class.forName`` from py4j would ask the system loader)."""
    try:
        return bool(jvm.org.apache.spark.util.Utils.classIsLoadable(name))
    except Exception:  # noqa: BLE001 - py4j raises its own error types
        return False


def feature_loaded(jvm: Any, feature: str) -> bool:
    """Whether ``feature``'s jars are on the driver JVM's classpath."""
    return class_loadable(jvm, PROBE_CLASSES[check_features([feature])[0]])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m slatelib.spark.jars",
                                description="Fetch, list and name slatelib's Spark jars.")
    p.add_argument("command", choices=("fetch", "print", "packages", "list"),
                   help="fetch: copy and check the jars; print: the --jars value; packages: "
                        "the --packages value; list: coordinates, sha256, feature")
    p.add_argument("--features", default=",".join(FEATURES),
                   help=f"comma-separated, of {', '.join(FEATURES)} (default: all)")
    p.add_argument("--dest", type=Path, default=None,
                   help=f"the jar folder (default ${JARS_DIR_ENV}, else build/jars)")
    p.add_argument("--mvn", default=os.environ.get("MVN", "mvn"), help="the Maven client")
    a = p.parse_args(argv)
    try:
        features = check_features(f for f in a.features.split(",") if f)
        directory = a.dest or default_dir()
        if a.command == "fetch":
            paths = fetch(directory, select(features), mvn=a.mvn,
                          log=lambda m: print(m, file=sys.stderr))
            print(f"jars: {len(paths)} checked in {directory}", file=sys.stderr)
        elif a.command == "print":
            found = local_jars(features, directory)
            if not found.complete:
                names = ", ".join(j.coordinates for j in found.missing)
                print(f"missing in {directory}: {names} (run make jars)", file=sys.stderr)
                return 1
            print(",".join(str(p) for p in found.paths))
        elif a.command == "packages":
            print(packages(features))
        else:
            for jar in select(features):
                print(f"{jar.coordinates} {jar.sha256} {jar.feature}")
    except SlateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, InvalidArgumentError) else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

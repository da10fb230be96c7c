"""The job record of a rescale, kept under every source it reads.

``<source>/slatelib/rescale/active.json`` holds the running job's
:class:`~slatelib.core.rescale_plan.RescalePlan` (0.17 never lists ``slatelib/``). It is
created with a conditional put, so of two jobs started on one source only one runs; a rerun
of the same command finds it and resumes that job. When the job is done the record is
copied to ``<source>/slatelib/rescale/<job id>.json`` (with its report) and ``active.json``
is deleted, in that order: a rerun after a kill in between finds the finished copy.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from slatelib.core.rescale_plan import RescalePlan
from slatelib.db_manifest import DbManifest
from slatelib.errors import (
    AlreadyExistsError,
    CommitStateUnknownError,
    ConflictError,
    InvalidDbStateError,
    ObjectMissingError,
    SlateError,
)
from slatelib.objstore import ObjectStore
from slatelib.paths import DbPaths, file_name

log = logging.getLogger(__name__)

ACTIVE = "active.json"


def active_path(source: str) -> str:
    return f"{DbPaths(source).rescale_dir}/{ACTIVE}"


def finished_path(source: str, job_id: str) -> str:
    return f"{DbPaths(source).rescale_dir}/{job_id}.json"


def read_active(store: ObjectStore, source: str) -> RescalePlan | None:
    """The running job on ``source``, if any.

    Raises:
        InvalidDbStateError: the record does not decode.
    """
    path = active_path(source)
    try:
        raw = store.get(path)
    except ObjectMissingError:
        return None
    return RescalePlan.from_json(raw, path=path)


def read_finished(store: ObjectStore, source: str) -> list[RescalePlan]:
    """Finished jobs recorded on ``source``, oldest first (unreadable records skipped)."""
    out = []
    for meta in store.list(DbPaths(source).rescale_dir):
        if file_name(meta.path) == ACTIVE or not meta.path.endswith(".json"):
            continue
        try:
            out.append(RescalePlan.from_json(store.get(meta.path), path=meta.path))
        except SlateError as exc:
            log.warning("skipping a rescale record [path=%s, error=%s]", meta.path, exc)
    return sorted(out, key=lambda p: p.created_ms)


def claim(store: ObjectStore, plan: RescalePlan) -> None:
    """Create ``active.json`` on every source (in path order). A source already running a
    job refuses; records this call created are removed again.

    Raises:
        InvalidDbStateError: a source runs another job (its record is there).
    """
    taken: list[str] = []
    for source in sorted(plan.source_paths):
        path = active_path(source)
        try:
            store.put_if_absent(path, plan.to_json())
        except (AlreadyExistsError, CommitStateUnknownError) as exc:
            current = read_active(store, source)
            if current is not None and current.job_id == plan.job_id:
                taken.append(path)  # our own write, its response lost
                continue
            for p in taken:
                store.delete(p)
            other = "" if current is None else f" ({current.kind} job {current.job_id})"
            raise InvalidDbStateError(
                f"source {source!r} is running another rescale job{other}; rerun that job's "
                "command to finish it; nothing was written") from exc
        taken.append(path)


def update(store: ObjectStore, plan: RescalePlan) -> None:
    """Rewrite ``active.json`` on every source (after the split keys are chosen).

    Raises:
        ConflictError: a source's record belongs to another job now.
    """
    for source in plan.source_paths:
        current = read_active(store, source)
        if current is None or current.job_id != plan.job_id:
            raise ConflictError(f"the rescale record of {source!r} is no longer job "
                                f"{plan.job_id}'s")
        store.put(active_path(source), plan.to_json())


def finish(store: ObjectStore, plan: RescalePlan, report: Mapping[str, Any]) -> None:
    """Record the finished job (with ``report``) and release every source's
    ``active.json``. Idempotent."""
    done = replace(plan, status="done")
    body = json.loads(done.to_json())
    body["report"] = dict(report)
    data = json.dumps(body, indent=1, sort_keys=True).encode()
    for source in plan.source_paths:
        store.put(finished_path(source, plan.job_id), data)
    release(store, plan.source_paths, plan.job_id)


def release(store: ObjectStore, sources: Sequence[str], job_id: str) -> None:
    """Delete the ``active.json`` records of job ``job_id`` (others' are left alone)."""
    for source in sources:
        current = read_active(store, source)
        if current is not None and current.job_id == job_id:
            store.delete(active_path(source))


_NOTHING_WRITTEN = re.compile(r"[;,]?\s*nothing( else)? was written\.?")
"""What a refusal of a step (a clone, a flush) says about its own writes, which is not true
of the job once its record exists."""


def written_so_far(store: ObjectStore, plan: RescalePlan) -> list[str]:
    """What job ``plan`` has written on its sources: its records, and each checkpoint of its
    own that is on a source now (best effort: a source that cannot be read is left out)."""
    out = [active_path(s) for s in plan.source_paths]
    if not plan.options.get("own_checkpoint", True):
        return out

    for src in plan.sources:
        try:
            latest = DbManifest(store, src.path).try_read_latest()
        except SlateError:
            continue
        if latest is not None and latest.value.checkpoint(uuid.UUID(src.checkpoint_id)):
            out.append(f"checkpoint {src.checkpoint_id} of {src.path!r}")
    return out


def failed_after_record(message: str, job_id: str, written: Sequence[str]) -> str:
    """The message of a failure after the job recorded itself: what the step said, without
    its claim that nothing was written, then what the job had written and the way on. Pure."""
    said = _NOTHING_WRITTEN.sub("", message).rstrip(" ;,.")
    return (f"{said}. Rescale job {job_id} had already written {', '.join(written)}: rerun "
            "the same command once this is fixed to resume the job, or delete the records "
            "(and the checkpoints: `slate --path SOURCE delete-checkpoint --id ID`) to "
            "abandon it")


def with_written_note(exc: SlateError, store: ObjectStore, plan: RescalePlan) -> SlateError:
    """``exc`` (same kind and attributes) with its message rewritten by
    :func:`failed_after_record`."""
    exc.args = (failed_after_record(str(exc), plan.job_id, written_so_far(store, plan)),)
    return exc

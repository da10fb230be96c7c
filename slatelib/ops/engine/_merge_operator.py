"""Merge-operator loading (private to :mod:`slatelib.ops.engine`): the one place a task's,
a rescale's or an export's ``merge_operator`` name becomes a :class:`MergeOperator`."""

from __future__ import annotations

import importlib

from slatelib.core.merge import MergeOperator, as_merge_operator
from slatelib.errors import InvalidArgumentError


def load_merge_operator(name: str | None) -> MergeOperator | None:
    """A builtin merge operator by name (``"concat"``), or ``"package.module:attr"`` where
    ``attr`` is an operator object, a class or factory returning one, or a function
    ``f(key, existing, operand)``.

    Raises:
        InvalidArgumentError: an unknown name or an import that fails.
    """
    if name is None or not name.strip():
        return None
    if ":" not in name:
        return as_merge_operator(name.strip())
    module_name, _, attr = name.strip().partition(":")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InvalidArgumentError(f"cannot load merge operator {name!r}: {exc}") from exc
    if isinstance(obj, type):
        obj = obj()
    elif callable(obj) and not hasattr(obj, "merge"):
        try:
            candidate = obj()
        except TypeError:
            candidate = obj
        obj = candidate if hasattr(candidate, "merge") else obj
    return as_merge_operator(obj)

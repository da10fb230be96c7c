"""StoreSpec: a small picklable value from which any process can reopen a store."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slatelib.errors import InternalError, InvalidArgumentError
from slatelib.objstore.cas_records import redact_cas_url

if TYPE_CHECKING:
    from slatelib.objstore.object_store import ObjectStore

OptionValue = str | bool | int | float

SECRET_OPTIONS = frozenset({"secret_access_key", "session_token", "token", "access_key"})
"""Option names whose values are never shown by ``repr`` (Azure's key is ``access_key``)."""


def option_to_str(key: str, value: OptionValue) -> str:
    """Canonical string form of one store option (booleans become ``true``/``false``).

    Raises:
        InvalidArgumentError: the key is not a non-empty string or the value is not a
            str, bool, int or float.
    """
    if not isinstance(key, str) or not key:
        raise InvalidArgumentError(f"store option name must be a non-empty string: {key!r}")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise InvalidArgumentError(
        f"store option {key!r} must be a str, bool, int or float, got {type(value).__name__}"
    )


_opener: Callable[[StoreSpec], ObjectStore] | None = None


def register_opener(opener: Callable[[StoreSpec], ObjectStore]) -> None:
    """Make :meth:`StoreSpec.open` use ``opener``: the store registry
    (:func:`slatelib.objstore.registry.open_spec`) registers itself when it is imported, so
    that the spec, which every store carries, never imports the registry back."""
    global _opener
    _opener = opener


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """URL of a store root plus explicit options, as sorted ``(key, value)`` string pairs,
    and ``defaults``: the ``[object_store]`` settings of the process that opened it (non-secret
    fallbacks below each opening process's environment, see
    :func:`slatelib.objstore.registry.set_store_defaults`).

    Spark ships this to executors, which call :meth:`open`. Options given here travel with
    the spec (pickled), so pass credentials through the environment of each process rather
    than as options where possible: environment variables are read by :meth:`open`, in the
    process that opens the store. ``repr`` hides secret values.

    ``wal``: the spec of the separate WAL store of a store opened with one
    (:mod:`slatelib.objstore.wal_routing`); :meth:`open` then reopens both.
    """

    url: str
    options: tuple[tuple[str, str], ...] = ()
    defaults: tuple[tuple[str, str], ...] = ()
    wal: StoreSpec | None = None

    @staticmethod
    def of(url: str, options: Mapping[str, OptionValue] | None = None,
           defaults: Mapping[str, str] | None = None) -> StoreSpec:
        """Build a spec with canonical (sorted, stringified) options.

        Raises:
            InvalidArgumentError: the URL is not a string or an option is malformed.
        """
        if not isinstance(url, str) or not url:
            raise InvalidArgumentError(f"url must be a non-empty string, got {url!r}")
        pairs = tuple(sorted((k, option_to_str(k, v)) for k, v in (options or {}).items()))
        return StoreSpec(url, pairs, tuple(sorted((defaults or {}).items())))

    def with_wal(self, wal: StoreSpec | None) -> StoreSpec:
        """This spec with ``wal`` as its WAL store's (None: without one)."""
        return StoreSpec(self.url, self.options, self.defaults, wal)

    def options_dict(self) -> dict[str, str]:
        """The options as a dict."""
        return dict(self.options)

    def open(self) -> ObjectStore:
        """Open the store this spec describes (see :func:`slatelib.objstore.open_store`).

        Raises:
            InvalidArgumentError: bad URL or options.
            StorageError: the store cannot be created (e.g. the local root is a file).
        """
        if _opener is None:  # importing slatelib.objstore registers it, before this module
            raise InternalError("no store opener registered (import slatelib.objstore)")
        return _opener(self)

    def __repr__(self) -> str:
        shown = tuple((k, "***" if k in SECRET_OPTIONS else redact_cas_url(v) if k == "cas"
                       else v) for k, v in self.options)
        more = f", defaults={self.defaults!r}" if self.defaults else ""
        if self.wal is not None:
            more += f", wal={self.wal!r}"
        return f"StoreSpec(url={self.url!r}, options={shown!r}{more})"

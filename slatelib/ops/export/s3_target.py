"""An export target on S3 (``s3://bucket/path`` or ``s3a://bucket/path``, the same object):
how pyarrow and delta-rs reach it, configured from the S3 settings slatelib resolves for
its own stores (:func:`slatelib.objstore.registry.s3_access`: store options, then
``SLATELIB_S3_*``/``AWS_*`` variables, then ``[object_store]``), so that the target is
reached with the same endpoint and credentials as the source database (``--env-file``).
Spark's own writers reach it through S3A (:mod:`slatelib.spark.s3a`).

The functions here are pure but for :func:`target_filesystem`, which builds (and does not
yet use) a pyarrow file system.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pyarrow.fs as pafs  # type: ignore[import-untyped]

from slatelib.errors import InvalidArgumentError
from slatelib.objstore.backends import S3Access

S3_SCHEMES = ("s3", "s3a")
"""The URL schemes of S3 targets; ``s3a://`` names the same bucket and key as ``s3://``."""


def split_s3_target(uri: str) -> tuple[str, str] | None:
    """``(bucket, key prefix)`` of an S3 target URL, None for any other URL.

    Raises:
        InvalidArgumentError: an S3 URL without a bucket, or with a query or fragment.
    """
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.lower() not in S3_SCHEMES:
        return None
    bucket, _, key = rest.partition("/")
    if not bucket or "?" in rest or "#" in rest:
        raise InvalidArgumentError(
            f"export target {uri!r}: expected {scheme}://BUCKET/PATH (no query or fragment)")
    return bucket, key.strip("/")


def is_s3_target(uri: str) -> bool:
    """Whether ``uri`` is an S3 target (``s3://`` or ``s3a://``).

    Raises:
        InvalidArgumentError: a malformed S3 URL.
    """
    return split_s3_target(uri) is not None


def as_s3_url(uri: str) -> str:
    """``uri`` with ``s3a://`` spelled ``s3://`` (what pyarrow and delta-rs know); any
    other URL unchanged."""
    parts = split_s3_target(uri)
    if parts is None:
        return uri
    bucket, key = parts
    return f"s3://{bucket}/{key}" if key else f"s3://{bucket}"


def deltars_storage_options(access: S3Access) -> dict[str, str]:
    """delta-rs ``storage_options`` for an S3 table: the endpoint, region, HTTP, addressing
    style and static credentials of ``access`` (none: delta-rs' own AWS chain), and commits
    made with conditional puts (``aws_conditional_put: etag``), safe with concurrent
    writers on S3 and S3-compatible stores that support them."""
    out = {"aws_conditional_put": "etag"}
    if access.endpoint:
        out["AWS_ENDPOINT_URL"] = access.endpoint
    if access.region:
        out["AWS_REGION"] = access.region
    if access.allow_http:
        out["AWS_ALLOW_HTTP"] = "true"
    out["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "true" if access.virtual_hosted_style else "false"
    out.update(access.credential_options("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                         "AWS_SESSION_TOKEN"))
    return out


def pyarrow_s3_options(access: S3Access) -> dict[str, object]:
    """Keyword arguments of ``pyarrow.fs.S3FileSystem`` for ``access`` (no credentials:
    pyarrow's AWS chain)."""
    out: dict[str, object] = {"allow_bucket_creation": False, "allow_bucket_deletion": False}
    if access.endpoint:
        parts = urlsplit(access.endpoint)
        out["endpoint_override"] = parts.netloc + parts.path.rstrip("/")
        out["scheme"] = parts.scheme
    if access.region:
        out["region"] = access.region
    if access.virtual_hosted_style is not None:
        out["force_virtual_addressing"] = access.virtual_hosted_style
    out.update(access.credential_options("access_key", "secret_key", "session_token"))
    return out


def target_filesystem(access: S3Access) -> pafs.S3FileSystem:
    """A pyarrow S3 file system reaching the target as ``access`` says (paths are
    ``bucket/key``)."""
    return pafs.S3FileSystem(**pyarrow_s3_options(access))


__all__ = ["S3_SCHEMES", "as_s3_url", "deltars_storage_options", "is_s3_target",
           "pyarrow_s3_options", "split_s3_target", "target_filesystem"]

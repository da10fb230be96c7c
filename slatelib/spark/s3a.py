"""Spark's own writers on an S3 export target, through Hadoop's S3A file system.

The target is reached with the S3 settings slatelib resolves for its own stores
(:func:`slatelib.objstore.registry.s3_access`: store options, then ``SLATELIB_S3_*``/``AWS_*``
variables, e.g. from ``--env-file``, then ``[object_store]``). :func:`s3a_conf` turns them
into Hadoop properties, pure:

- for the target's bucket only (S3A's per-bucket form ``fs.s3a.bucket.<bucket>.<option>``,
  so any other bucket the application uses keeps its own settings): ``endpoint``,
  ``endpoint.region``, ``path.style.access`` (true unless virtual-hosted requests are asked
  for; left to S3A on AWS's own endpoint), ``connection.ssl.enabled`` (from the
  endpoint's scheme) and static credentials (``access.key``, ``secret.key``,
  ``session.token`` with ``SimpleAWSCredentialsProvider``, or
  ``TemporaryAWSCredentialsProvider`` with a session token); with no credentials, S3A's
  default chain (instance roles...) applies;
- ``fs.s3.impl`` and ``fs.AbstractFileSystem.s3.impl``: S3A, so ``s3://`` URLs work.

What is already set wins: an option given for the bucket or for every bucket (``fs.s3a.X``)
is left alone, and credentials are left alone as a group when any credential option is
given (spark-submit's ``--conf spark.hadoop...``, ``spark-defaults.conf``, ``core-site.xml``,
or the session's Hadoop configuration; Hadoop's own ``*-default.xml`` values do not count).
:func:`configure_s3a_target` applies them to a running session's Hadoop configuration before
the export opens the target, whether the export runs as the job or as a library call,
and first refuses (before anything is written) when S3A's classes are not on the driver's
class path. Values of the credential options are never logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from slatelib.errors import InvalidArgumentError
from slatelib.objstore.backends import S3Access
from slatelib.objstore.registry import s3_access
from slatelib.ops.export.s3_target import split_s3_target
from slatelib.spark.jars import class_loadable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
S3A_ABSTRACT_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3A"
SIMPLE_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
TEMPORARY_PROVIDER = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
CREDENTIAL_OPTIONS = ("aws.credentials.provider", "access.key", "secret.key", "session.token")
"""S3A options that are set (or left alone) together."""
SECRET_OPTIONS = frozenset({"access.key", "secret.key", "session.token"})
GLOBAL_KEYS = {"fs.s3.impl": S3A_FILESYSTEM,
               "fs.AbstractFileSystem.s3.impl": S3A_ABSTRACT_FILESYSTEM}
REQUIRED_CLASSES = (S3A_FILESYSTEM, "software.amazon.awssdk.services.s3.S3Client")
"""hadoop-aws's file system and the AWS SDK v2 it needs (the bundle jar)."""
JARS_HINT = (
    "add the S3A jars of Spark's Hadoop 3.5.0 (slatelib/spark/jars.lock): spark-submit --jars "
    "hadoop-aws-3.5.0.jar,bundle-2.35.4.jar,analyticsaccelerator-s3-1.3.1.jar, i.e. --jars "
    "$(python -m slatelib.spark.jars print --features delta,s3a), or --packages "
    "org.apache.hadoop:hadoop-aws:3.5.0; slate-spark and python jobs/export.py add them "
    "themselves once `make jars` fetched them")


def s3a_options(access: S3Access) -> dict[str, str]:
    """The S3A options (``fs.s3a.`` left off) that reach S3 as ``access`` says."""
    out: dict[str, str] = {}
    if access.endpoint:
        out["endpoint"] = access.endpoint
        out["connection.ssl.enabled"] = "false" if access.endpoint.startswith(
            "http://") else "true"
    if access.region:
        out["endpoint.region"] = access.region
    if access.endpoint or access.virtual_hosted_style is not None:
        out["path.style.access"] = "false" if access.virtual_hosted_style else "true"
    keys = access.credential_options("access.key", "secret.key", "session.token")
    if keys:
        out.update(keys)
        out["aws.credentials.provider"] = (TEMPORARY_PROVIDER if "session.token" in keys
                                           else SIMPLE_PROVIDER)
    return out


def bucket_key(bucket: str, option: str) -> str:
    return f"fs.s3a.bucket.{bucket}.{option}"


def keys_to_check(bucket: str) -> list[str]:
    """Every Hadoop key whose being set keeps :func:`s3a_conf` from setting one of its own."""
    options = ["endpoint", "connection.ssl.enabled", "endpoint.region", "path.style.access",
               *CREDENTIAL_OPTIONS]
    return [*GLOBAL_KEYS, *(f"fs.s3a.{o}" for o in options),
            *(bucket_key(bucket, o) for o in options)]


def s3a_conf(access: S3Access, bucket: str,
             given: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Hadoop properties for an export target in ``bucket`` (see the module docstring),
    leaving out what ``given`` (Hadoop keys already set) decides. Pure."""
    given = given or {}

    def is_given(option: str) -> bool:
        return f"fs.s3a.{option}" in given or bucket_key(bucket, option) in given

    options = s3a_options(access)
    if any(is_given(o) for o in CREDENTIAL_OPTIONS):
        options = {k: v for k, v in options.items() if k not in CREDENTIAL_OPTIONS}
    out = {bucket_key(bucket, k): v for k, v in options.items() if not is_given(k)}
    out.update({k: v for k, v in GLOBAL_KEYS.items() if k not in given})
    return out


def spark_properties(conf: Mapping[str, str]) -> dict[str, str]:
    """Hadoop properties as Spark properties (``spark.hadoop.`` prefixed)."""
    return {f"spark.hadoop.{k}": v for k, v in conf.items()}


def redacted(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` with the values of credential keys hidden (for logs and reports)."""
    return {k: "*****" if _is_secret(k) else v for k, v in conf.items()}


def _is_secret(key: str) -> bool:
    return any(key.endswith("." + o) for o in SECRET_OPTIONS)


def require_s3a(has_class: Callable[[str], bool], uri: str) -> None:
    """Refuse an S3 target when S3A's classes cannot be loaded (``has_class``).

    Raises:
        InvalidArgumentError: a class of :data:`REQUIRED_CLASSES` is missing; the message
            names the jars to add.
    """
    missing = [c for c in REQUIRED_CLASSES if not has_class(c)]
    if missing:
        raise InvalidArgumentError(
            f"--to {uri}: Spark cannot write to S3 without Hadoop's S3A file system "
            f"({', '.join(missing)} not on the driver's class path): {JARS_HINT}")


def configure_s3a_target(spark: SparkSession, uri: str) -> dict[str, str]:
    """For an S3 target (``s3://``, ``s3a://``): check that S3A is loadable, then set on
    the session's Hadoop configuration what :func:`s3a_conf` gives and is not set yet.
    Returns the keys set (credential values redacted); ``{}`` for any other target.

    Raises:
        InvalidArgumentError: S3A's classes are missing, or malformed S3 settings.
    """
    parts = split_s3_target(uri)
    if parts is None:
        return {}
    jsc = spark.sparkContext._jsc
    assert jsc is not None
    require_s3a(lambda name: class_loadable(spark.sparkContext._jvm, name), uri)
    hconf = jsc.hadoopConfiguration()
    bucket = parts[0]
    given = {k: "" for k in keys_to_check(bucket) if _is_set(hconf, k)}
    conf = s3a_conf(s3_access(), bucket, given)
    for key, value in conf.items():
        hconf.set(key, value)
    shown = redacted(conf)
    log.info("export target on S3A [bucket=%s, set=%s, left_as_given=%s]", bucket,
             sorted(shown), sorted(given))
    return shown


def _is_set(hconf: object, key: str) -> bool:
    """Whether the Hadoop configuration has ``key`` from anything but Hadoop's defaults."""
    if hconf.get(key) is None:  # type: ignore[attr-defined]
        return False
    sources = hconf.getPropertySources(key)  # type: ignore[attr-defined]
    return not sources or not all(str(s).endswith("-default.xml") for s in sources)


__all__ = ["JARS_HINT", "REQUIRED_CLASSES", "configure_s3a_target", "keys_to_check",
           "redacted", "require_s3a", "s3a_conf", "s3a_options", "spark_properties"]

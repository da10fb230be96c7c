"""The S3A properties of an S3 export target (pure): per-bucket, what is given wins,
credentials as a group, secrets redacted, missing S3A classes refused with the jars."""

from __future__ import annotations

import pytest

from slatelib.errors import InvalidArgumentError
from slatelib.objstore.backends import S3Access
from slatelib.spark.s3a import (
    SIMPLE_PROVIDER,
    TEMPORARY_PROVIDER,
    redacted,
    require_s3a,
    s3a_conf,
    spark_properties,
)

MOTO = S3Access(endpoint="http://127.0.0.1:9000", region="us-east-1", allow_http=True,
                access_key_id="AKID", secret_access_key="SECRET", credentials_from="AWS_*")


def test_moto_like_access_becomes_per_bucket_s3a_properties_and_s3_goes_to_s3a() -> None:
    conf = s3a_conf(MOTO, "lake")
    b = "fs.s3a.bucket.lake."
    assert conf == {
        b + "endpoint": "http://127.0.0.1:9000", b + "connection.ssl.enabled": "false",
        b + "endpoint.region": "us-east-1", b + "path.style.access": "true",
        b + "access.key": "AKID", b + "secret.key": "SECRET",
        b + "aws.credentials.provider": SIMPLE_PROVIDER,
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A"}
    assert spark_properties(conf)["spark.hadoop.fs.s3.impl"] == conf["fs.s3.impl"]


def test_a_session_token_uses_the_temporary_provider() -> None:
    conf = s3a_conf(S3Access(access_key_id="a", secret_access_key="s", session_token="t"), "b")
    assert conf["fs.s3a.bucket.b.session.token"] == "t"
    assert conf["fs.s3a.bucket.b.aws.credentials.provider"] == TEMPORARY_PROVIDER


def test_no_credentials_and_no_endpoint_leave_s3a_its_defaults() -> None:
    conf = s3a_conf(S3Access(region="eu-west-1"), "b")
    assert conf == {"fs.s3a.bucket.b.endpoint.region": "eu-west-1",
                    "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
                    "fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A"}
    https = s3a_conf(S3Access(endpoint="https://minio:9000", virtual_hosted_style=True), "b")
    assert https["fs.s3a.bucket.b.connection.ssl.enabled"] == "true"
    assert https["fs.s3a.bucket.b.path.style.access"] == "false"


def test_what_is_given_globally_or_for_the_bucket_wins() -> None:
    given = {"fs.s3a.endpoint": "https://corp", "fs.s3a.bucket.lake.path.style.access": "x",
             "fs.s3.impl": "com.amazon.ws.emr.hadoop.fs.EmrFileSystem"}
    conf = s3a_conf(MOTO, "lake", given)
    assert not set(conf) & {"fs.s3a.bucket.lake.endpoint", "fs.s3a.bucket.lake.path.style.access",
                            "fs.s3.impl"}
    assert conf["fs.s3a.bucket.lake.access.key"] == "AKID"
    # one credential option given (any bucket-wide or global form): none of ours
    for key in ("fs.s3a.aws.credentials.provider", "fs.s3a.bucket.lake.secret.key"):
        conf = s3a_conf(MOTO, "lake", {key: "x"})
        assert not [k for k in conf if k.endswith(("access.key", "secret.key",
                                                   "credentials.provider"))], key
        assert conf["fs.s3a.bucket.lake.endpoint"] == "http://127.0.0.1:9000"
    # another bucket's settings do not count
    assert "fs.s3a.bucket.lake.endpoint" in s3a_conf(MOTO, "lake",
                                                    {"fs.s3a.bucket.other.endpoint": "x"})


def test_secrets_are_redacted_and_absent_from_the_repr() -> None:
    shown = redacted(s3a_conf(MOTO.__class__(access_key_id="a", secret_access_key="s",
                                             session_token="t"), "b"))
    assert {shown[f"fs.s3a.bucket.b.{o}"] for o in ("access.key", "secret.key",
                                                   "session.token")} == {"*****"}
    assert "SECRET" not in repr(MOTO) and "AKID" not in repr(MOTO)


def test_missing_s3a_classes_are_refused_with_the_jars_to_add() -> None:
    with pytest.raises(InvalidArgumentError, match=r"S3AFileSystem.*--jars hadoop-aws-3\.5\.0"):
        require_s3a(lambda name: "awssdk" in name, "s3://lake/t")
    with pytest.raises(InvalidArgumentError, match=r"awssdk.*bundle-2\.35\.4\.jar"):
        require_s3a(lambda name: "hadoop" in name, "s3://lake/t")
    require_s3a(lambda name: True, "s3://lake/t")

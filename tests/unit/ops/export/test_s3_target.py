"""S3 export targets for pyarrow and delta-rs (pure): URLs, storage options, file system
options, from the settings slatelib resolves for its own S3 stores."""

from __future__ import annotations

import pytest

from slatelib.errors import InvalidArgumentError
from slatelib.objstore.backends import S3Access
from slatelib.ops.export.s3_target import (
    as_s3_url,
    deltars_storage_options,
    is_s3_target,
    pyarrow_s3_options,
    split_s3_target,
)

MOTO = S3Access(endpoint="http://127.0.0.1:9000", region="us-east-1", allow_http=True,
                access_key_id="AKID", secret_access_key="SECRET")


def test_s3_and_s3a_urls_name_the_same_bucket_and_key() -> None:
    assert split_s3_target("s3a://lake/t/x/") == split_s3_target("s3://lake/t/x") == (
        "lake", "t/x")
    assert as_s3_url("s3a://lake/t") == "s3://lake/t" and as_s3_url("s3a://lake") == "s3://lake"
    assert as_s3_url("file:///tmp/t") == "file:///tmp/t"
    assert not is_s3_target("/tmp/t") and not is_s3_target("file:///t")
    for bad in ("s3:///t", "s3a://b/t?x=1"):
        with pytest.raises(InvalidArgumentError, match="BUCKET"):
            split_s3_target(bad)


def test_deltars_options_carry_the_endpoint_credentials_and_conditional_puts() -> None:
    assert deltars_storage_options(MOTO) == {
        "aws_conditional_put": "etag", "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false", "AWS_ACCESS_KEY_ID": "AKID",
        "AWS_SECRET_ACCESS_KEY": "SECRET"}
    chain = deltars_storage_options(S3Access(virtual_hosted_style=True))
    assert chain == {"aws_conditional_put": "etag", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true"}
    token = deltars_storage_options(S3Access(access_key_id="a", secret_access_key="s",
                                             session_token="t"))
    assert token["AWS_SESSION_TOKEN"] == "t"


def test_pyarrow_options_split_the_endpoint_into_host_and_scheme() -> None:
    assert pyarrow_s3_options(MOTO) == {
        "allow_bucket_creation": False, "allow_bucket_deletion": False,
        "endpoint_override": "127.0.0.1:9000", "scheme": "http", "region": "us-east-1",
        "access_key": "AKID", "secret_key": "SECRET"}
    assert pyarrow_s3_options(S3Access()) == {"allow_bucket_creation": False,
                                              "allow_bucket_deletion": False}

"""Store URLs (slatelib/objstore/url.py): split_db_url, and the mistakes it explains."""

from __future__ import annotations

import pytest

from slatelib.errors import InvalidArgumentError
from slatelib.objstore import open_raw_store, split_db_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("file:///a/b/db", ("file:///", "a/b/db")),
        ("file:///a/b/db/", ("file:///", "a/b/db")),
        ("s3://bucket/a/db", ("s3://bucket", "a/db")),
        ("s3://my.bucket-1/db", ("s3://my.bucket-1", "db")),
        ("memory:///x/db", ("memory:///", "x/db")),
        ("memory://named/x/db", ("memory://named", "x/db")),
        ("gs://bkt/p/db", ("gs://bkt", "p/db")),
        ("az://container/db", ("az://container", "db")),
    ],
)
def test_split_db_url(url: str, expected: tuple[str, str]) -> None:
    assert split_db_url(url) == expected


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://host/db", "unknown or missing scheme"),
        ("/local/path/db", "unknown or missing scheme"),
        ("S3://bucket/db", "unknown or missing scheme"),
        ("file:/a/db", "unknown or missing scheme"),
        ("file://host/a/db", "no host"),
        ("s3:///db", "bucket"),
        ("s3://user:pw@bucket/db", "bucket"),
        ("s3://bucket:9000/db", "bucket"),
        ("s3://bucket/a/../db", "'..'"),
        ("s3://bucket/a//db", "empty segment"),
        ("s3://bucket/db?x=1", "query"),
        ("s3://bucket/db#frag", "query or fragment"),
        ("file:///a/p%20q/db", "printable ASCII"),
        ("s3://bucket", "no database path"),
        ("memory:///", "no database path"),
    ],
)
def test_split_db_url_rejects_bad_urls_naming_the_argument(url: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match="database url") as info:
        split_db_url(url)
    assert message in str(info.value)


def test_split_db_url_rejects_non_strings() -> None:
    with pytest.raises(InvalidArgumentError):
        split_db_url(None)  # type: ignore[arg-type]


def test_database_url_with_an_empty_leading_segment_is_refused() -> None:
    import pytest

    from slatelib.errors import InvalidArgumentError
    from slatelib.objstore import split_db_url

    for url in ("s3://bucket//db", "file:////data/db", "memory:////x"):
        with pytest.raises(InvalidArgumentError, match="empty segment"):
            split_db_url(url)


@pytest.mark.parametrize("url, message", [
    ("s3://", r"missing bucket \(write s3://BUCKET\[/path\]\)"),
    ("az:///x", "missing container"),
    ("fiel:///data", "did you mean file://"),
    ("/data/db", "a local path is written file:///data/db"),
])
def test_store_url_mistakes_say_how_to_fix_them(url: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        open_raw_store(url)

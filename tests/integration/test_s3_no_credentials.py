"""S3 without credentials is a configuration error (exit 2) that says how to give them,
not an ``io_failure`` to retry (issue 27, "the first hour")."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.s3_server import create_bucket


def test_slate_on_s3_without_credentials_exits_2_naming_the_ways_to_give_them(
    moto_endpoint: str,
) -> None:
    bucket = create_bucket(moto_endpoint)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "SLATELIB_", "GOOGLE_", "AZURE_"))}
    env.update({
        "SLATELIB_S3_ENDPOINT": moto_endpoint, "SLATELIB_S3_ALLOW_HTTP": "true",
        # no instance metadata reachable: point the chain at a closed local port
        "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:9",
        "AWS_EC2_METADATA_DISABLED": "true",
    })
    r = subprocess.run(
        [sys.executable, "-c", "import sys; from slatelib.cli.app import main; "
         "sys.exit(main())", "--db", f"s3://{bucket.name}/db", "summary"],
        env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 2, r.stderr
    assert "no S3 credentials" in r.stderr
    for way in ("SLATELIB_S3_ACCESS_KEY_ID", "--env-file", "AWS_ACCESS_KEY_ID"):
        assert way in r.stderr
    assert "Traceback" not in r.stderr

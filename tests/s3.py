"""The S3-compatible endpoint for tests: SeaweedFS `weed mini`, started by `scripts/test`.

`scripts/test` starts one throwaway `weed mini` (strict SigV4 signatures, conditional PUT) and
exports its endpoint, region, bucket and credentials as `AIDEMEMO_TEST_S3_*`. Without them an S3
test is skipped, except under `CI=true`, where it fails: CI must never pass by skipping the S3
tiers. Tests share the one bucket and keep apart by a fresh key prefix each.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

ENDPOINT_ENV = "AIDEMEMO_TEST_S3_ENDPOINT"


@dataclass(frozen=True)
class S3Endpoint:
    """Where the test S3 server listens and the credentials of its one identity."""

    endpoint: str
    region: str
    bucket: str
    access_key_id: str
    secret_access_key: str

    def client(self, **config: Any) -> Any:
        """A boto3 S3 client for this endpoint (path-style unless `config` says otherwise)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            config=Config(
                signature_version="s3v4",
                s3={"addressing_style": config.pop("addressing_style", "path")},
                **config,
            ),
        )


def s3_endpoint() -> S3Endpoint:
    """The test S3 server; skips the test (fails it under CI=true) when there is none."""
    endpoint = os.environ.get(ENDPOINT_ENV, "")
    if not endpoint:
        message = f"no S3 endpoint: {ENDPOINT_ENV} is not set (scripts/test starts SeaweedFS)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + "; CI must not skip the S3 tests")
        pytest.skip(message)
    return S3Endpoint(
        endpoint=endpoint,
        region=os.environ.get("AIDEMEMO_TEST_S3_REGION", "us-east-1"),
        bucket=os.environ.get("AIDEMEMO_TEST_S3_BUCKET", "aidememo-test"),
        access_key_id=os.environ["AIDEMEMO_TEST_S3_ACCESS_KEY_ID"],
        secret_access_key=os.environ["AIDEMEMO_TEST_S3_SECRET_ACCESS_KEY"],
    )


def fresh_prefix() -> str:
    """A key prefix no other test uses."""
    return f"t-{uuid.uuid4().hex[:12]}/"

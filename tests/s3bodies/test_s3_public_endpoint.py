"""`--s3-public-endpoint` (SPEC.md OBJ-4): grant URLs name the endpoint the uploaders reach,
while the service speaks to its own and the catalog's identity stays the same. Presigning is
offline, so these checks need no S3 server; the container tier runs one end to end."""

from __future__ import annotations

import argparse
from urllib.parse import urlsplit

import pytest

from origin.s3_bodies import S3Bodies, S3Config
from origin.s3_options import S3Settings, open_s3_bodies, s3_settings

INSIDE, PUBLIC = "http://seaweedfs:8333", "http://127.0.0.1:18333"
KEY = "gen_public_endpoint_1"


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKPUBLICENDPOINT")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-real-secret")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")


def _settings(public: str | None) -> S3Settings:
    ns = argparse.Namespace(
        artifact_backend="s3", s3_bucket="bodies", s3_prefix="p/", s3_endpoint=INSIDE,
        s3_region="us-east-1", s3_addressing="path", s3_public_endpoint=public,
    )  # fmt: skip
    settings = s3_settings(ns)
    assert settings is not None
    return settings


def test_obj4_grants_name_the_public_endpoint_the_service_its_own() -> None:
    bodies = open_s3_bodies(_settings(PUBLIC))
    assert isinstance(bodies, S3Bodies)
    put, headers = bodies.presign_put(KEY, 3, "text/plain", 60)
    get, _ = bodies.presign_get(KEY, '"etag"', 60)
    for url in (put, get):
        parts = urlsplit(url)
        assert f"{parts.scheme}://{parts.netloc}" == PUBLIC
        assert parts.path == f"/bodies/p/{KEY}"
    assert headers["If-None-Match"] == "*"
    assert bodies.client.meta.endpoint_url == INSIDE  # the service's own requests
    # The identity pins the bucket's layout, not where uploaders reach it (OBJ-2).
    plain = open_s3_bodies(_settings(None))
    assert isinstance(plain, S3Bodies)
    assert bodies.identity == plain.identity
    assert urlsplit(plain.presign_put(KEY, 3, "text/plain", 60)[0]).netloc == "seaweedfs:8333"


def test_obj4_a_public_endpoint_must_be_a_plain_http_url() -> None:
    for bad in ("ftp://host", "http://user:pw@host", "http://host/?q=1", "nohost"):
        with pytest.raises(ValueError, match="S3 endpoint"):
            S3Config(bucket="bodies", endpoint=INSIDE, public_endpoint=bad)

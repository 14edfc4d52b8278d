"""The stdlib presigner's URLs and signed requests against a real S3 server (GRANT-2).

SeaweedFS `weed mini` (started by scripts/test, tests/s3.py) checks SigV4 signatures, expiry
and conditional PUT strictly, like S3 and R2.
"""

from __future__ import annotations

import hashlib
import time

import httpx
import pytest

from aidememo.bodies.sigv4 import Credentials, S3Location, presign_url, sign_request
from tests.s3 import S3Endpoint, fresh_prefix, s3_endpoint


@pytest.fixture
def s3() -> S3Endpoint:
    return s3_endpoint()


def _setup(s3: S3Endpoint) -> tuple[Credentials, S3Location, str]:
    creds = Credentials(s3.access_key_id, s3.secret_access_key)
    loc = S3Location(s3.endpoint, s3.region, s3.bucket, "path")
    return creds, loc, fresh_prefix()


def _put_headers(body: bytes, content_type: str = "text/plain") -> dict[str, str]:
    return {"Content-Length": str(len(body)), "Content-Type": content_type, "If-None-Match": "*"}


def test_grant2_presigned_put_head_get_round_trip(s3: S3Endpoint) -> None:
    creds, loc, prefix = _setup(s3)
    # Keys of several character classes round-trip through the real server (dot segments are
    # left to the botocore table: HTTP clients remove them from a URL before sending it).
    for name in ("plain", "sp ace+plus", "unicode-é-日本", "q!'()*;=@,$&~", "a//b"):
        key = prefix + name
        body = f"body of {name}".encode()
        now = int(time.time())
        headers = _put_headers(body)
        url = presign_url(creds, loc, "PUT", key, now_s=now, expires_s=300, headers=headers)
        put = httpx.put(url, content=body, headers=headers)
        assert put.status_code == 200, (name, put.text)
        etag = put.headers["etag"]
        assert etag.strip('"') == hashlib.md5(body).hexdigest()

        head = httpx.head(presign_url(creds, loc, "HEAD", key, now_s=now, expires_s=300))
        assert head.status_code == 200
        assert int(head.headers["content-length"]) == len(body)
        assert head.headers["content-type"] == "text/plain"

        bound = {"If-Match": etag}
        get_url = presign_url(creds, loc, "GET", key, now_s=now, expires_s=300, headers=bound)
        got = httpx.get(get_url, headers=bound)
        assert got.status_code == 200 and got.content == body
        stale = {"If-Match": '"0123456789abcdef0123456789abcdef"'}
        stale_url = presign_url(creds, loc, "GET", key, now_s=now, expires_s=300, headers=stale)
        assert httpx.get(stale_url, headers=stale).status_code == 412

        url, signed = sign_request(creds, loc, "HEAD", key, now_s=int(time.time()))
        assert httpx.head(url, headers=signed).status_code == 200
    url, signed = sign_request(creds, loc, "HEAD", prefix + "missing", now_s=int(time.time()))
    assert httpx.head(url, headers=signed).status_code == 404


def test_grant2_second_conditional_put_is_412_and_keeps_the_body(s3: S3Endpoint) -> None:
    creds, loc, prefix = _setup(s3)
    key = prefix + "once"
    first, second = b"first", b"other"
    now = int(time.time())
    for body, status in ((first, 200), (second, 412), (first, 412)):
        headers = _put_headers(body)
        url = presign_url(creds, loc, "PUT", key, now_s=now, expires_s=300, headers=headers)
        assert httpx.put(url, content=body, headers=headers).status_code == status
    get_url = presign_url(creds, loc, "GET", key, now_s=now, expires_s=300)
    assert httpx.get(get_url).content == first


def test_grant2_refuses_wrong_length_type_signature_missing_header_and_expiry(
    s3: S3Endpoint,
) -> None:
    creds, loc, prefix = _setup(s3)
    key = prefix + "guarded"
    body = b"exactly"
    now = int(time.time())
    headers = _put_headers(body)
    url = presign_url(creds, loc, "PUT", key, now_s=now, expires_s=300, headers=headers)

    longer = body + b"!"
    wrong_length = dict(headers, **{"Content-Length": str(len(longer))})
    assert httpx.put(url, content=longer, headers=wrong_length).status_code == 403
    wrong_type = dict(headers, **{"Content-Type": "text/html"})
    assert httpx.put(url, content=body, headers=wrong_type).status_code == 403
    no_condition = {k: v for k, v in headers.items() if k != "If-None-Match"}
    assert httpx.put(url, content=body, headers=no_condition).status_code == 403
    tampered = url[:-1] + ("0" if url[-1] != "0" else "1")
    assert httpx.put(tampered, content=body, headers=headers).status_code == 403
    wrong_secret = Credentials(creds.access_key_id, creds.secret_access_key + "x")
    forged = presign_url(wrong_secret, loc, "PUT", key, now_s=now, expires_s=300, headers=headers)
    assert httpx.put(forged, content=body, headers=headers).status_code == 403
    expired = presign_url(creds, loc, "PUT", key, now_s=now - 600, expires_s=60, headers=headers)
    assert httpx.put(expired, content=body, headers=headers).status_code == 403
    # Nothing of the refused attempts was stored; the exact request still works once.
    head = presign_url(creds, loc, "HEAD", key, now_s=now, expires_s=300)
    assert httpx.head(head).status_code == 404
    assert httpx.put(url, content=body, headers=headers).status_code == 200
    assert httpx.put(url, content=body, headers=headers).status_code == 412


def test_obj1_missing_s3_server_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIDEMEMO_TEST_S3_ENDPOINT", raising=False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must not skip"):
        s3_endpoint()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        s3_endpoint()

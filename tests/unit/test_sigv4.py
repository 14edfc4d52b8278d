"""The stdlib SigV4 signer against botocore's, byte for byte, on a table of inputs (GRANT-1)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from aidememo.bodies.sigv4 import Credentials, S3Location, presign_url, sign_request

botocore = pytest.importorskip("botocore")
boto3 = pytest.importorskip("boto3")

NOW_S = 1_796_146_205  # a fixed clock: 2026-12-01T17:30:05Z
CREDS = [
    Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
    Credentials("AKTEMP", "s3cr3t/with+slash=", session_token="FwoGZXIvYXdz//tok+en=="),
]
LOCATIONS = [
    S3Location("https://acct123.r2.cloudflarestorage.com", "auto", "aidememo-bodies", "path"),
    S3Location("https://acct123.r2.cloudflarestorage.com", "auto", "aidememo-bodies", "virtual"),
    S3Location("http://127.0.0.1:8333", "us-east-1", "aidememo-test", "path"),
    S3Location("http://localhost:9000", "eu-west-3", "bucket.with.dots", "path"),
    S3Location("http://localhost:9000", "eu-west-3", "my-bucket", "virtual"),
    S3Location("https://s3.example.com:8443", "us-west-2", "b-1", "virtual"),
]
# Keys with every character class: unreserved, reserved and sub-delimiters, space, percent,
# non-ASCII (two-, three- and four-byte UTF-8), a control character, empty and dot segments.
KEYS = [
    "plain",
    "gen/ab/Xy_09-.~",
    "reserved/!*'();:@&=+$,?#[]",
    "space and %20 percent%",
    "unicode/é/日本語/🙂",
    "tab\there",
    "a//b/./c/../d",
    "trailing/",
    'quote"and<angle>{brace}|pipe^caret`tick\\back',
]
PARAMS = {
    "Content-Length": "ContentLength",
    "Content-Type": "ContentType",
    "If-None-Match": "IfNoneMatch",
    "If-Match": "IfMatch",
}
OPERATIONS = {"PUT": "put_object", "GET": "get_object", "HEAD": "head_object"}
HEADER_SETS: dict[str, list[dict[str, str]]] = {
    "PUT": [
        {},
        {"Content-Length": "5", "Content-Type": "text/plain", "If-None-Match": "*"},
        {"Content-Length": "5368709120", "Content-Type": "application/octet-stream"},
        {"If-Match": '"9b2cf535f27731c974343645a3985328"', "Content-Type": "a/b; x=1"},
    ],
    "GET": [{}, {"If-Match": '"9b2cf535f27731c974343645a3985328"'}],
    "HEAD": [{}, {"If-Match": '"abc"'}],
}
EXPIRIES = [1, 900, 3600, 604800]


@pytest.fixture
def frozen_botocore(monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = datetime.datetime.fromtimestamp(NOW_S, datetime.UTC).replace(tzinfo=None)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: fixed)


def _client(creds: Credentials, loc: S3Location) -> Any:
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=loc.endpoint,
        region_name=loc.region,
        aws_access_key_id=creds.access_key_id,
        aws_secret_access_key=creds.secret_access_key,
        aws_session_token=creds.session_token,
        config=Config(signature_version="s3v4", s3={"addressing_style": loc.addressing}),
    )


def _botocore_url(
    client: Any, loc: S3Location, method: str, key: str, headers: dict[str, str], expires: int
) -> str:
    params: dict[str, Any] = {"Bucket": loc.bucket, "Key": key}
    for name, value in headers.items():
        params[PARAMS[name]] = int(value) if name == "Content-Length" else value
    url: str = client.generate_presigned_url(OPERATIONS[method], Params=params, ExpiresIn=expires)
    return url


def _cases() -> list[tuple[str, dict[str, str]]]:
    return [(method, headers) for method, sets in HEADER_SETS.items() for headers in sets]


@pytest.mark.usefixtures("frozen_botocore")
@pytest.mark.parametrize("loc", LOCATIONS, ids=lambda loc: f"{loc.addressing}-{loc.endpoint}")
@pytest.mark.parametrize("creds", CREDS, ids=["keys", "session"])
def test_grant1_presigned_urls_match_botocore(creds: Credentials, loc: S3Location) -> None:
    client = _client(creds, loc)
    checked = 0
    for key in KEYS:
        for method, headers in _cases():
            for expires in EXPIRIES:
                want = _botocore_url(client, loc, method, key, headers, expires)
                got = presign_url(
                    creds, loc, method, key, now_s=NOW_S, expires_s=expires, headers=headers
                )
                assert got == want, (method, key, headers, expires)
                checked += 1
    assert checked == len(KEYS) * len(_cases()) * len(EXPIRIES)


@pytest.mark.usefixtures("frozen_botocore")
@pytest.mark.parametrize("loc", LOCATIONS, ids=lambda loc: f"{loc.addressing}-{loc.endpoint}")
@pytest.mark.parametrize("creds", CREDS, ids=["keys", "session"])
def test_grant1_signed_head_matches_botocore(creds: Credentials, loc: S3Location) -> None:
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials

    boto_creds = BotoCredentials(creds.access_key_id, creds.secret_access_key, creds.session_token)
    for key in KEYS:
        for headers in ({}, {"If-Match": '"abc"'}):
            url, signed = sign_request(creds, loc, "HEAD", key, now_s=NOW_S, headers=headers)
            request = AWSRequest(method="HEAD", url=url, headers=dict(headers))
            S3SigV4Auth(boto_creds, "s3", loc.region).add_auth(request)
            assert url == request.url
            assert signed == dict(request.headers.items()), (key, headers)


def test_grant1_refuses_what_it_cannot_sign() -> None:
    creds = CREDS[0]
    loc = LOCATIONS[0]
    with pytest.raises(ValueError):
        presign_url(creds, loc, "POST", "k", now_s=NOW_S, expires_s=60)
    with pytest.raises(ValueError):
        presign_url(creds, loc, "GET", "k", now_s=NOW_S, expires_s=604801)
    with pytest.raises(ValueError):
        presign_url(creds, loc, "GET", "", now_s=NOW_S, expires_s=60)
    with pytest.raises(ValueError):
        S3Location("http://127.0.0.1:9000", "us-east-1", "my-bucket", "virtual")
    with pytest.raises(ValueError):
        S3Location("http://localhost:9000", "us-east-1", "Not_DNS", "virtual")
    with pytest.raises(ValueError):
        S3Location("http://localhost:9000/base", "us-east-1", "my-bucket", "path")
    assert creds.secret_access_key not in repr(creds)
    assert "tok" not in repr(CREDS[1])

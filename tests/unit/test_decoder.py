"""The strict decoder's checks before and after parsing (SPEC.md CJ-3, CJ-4), the query
string's UTF-8 rules (HTTP-3) and the charset rule (HTTP-7), without a server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aidememo.domain.canonical import _depth_exceeds, canonical_bytes, decode_json, decode_utf8
from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.http.media import check_media_type
from aidememo.http.query import Query


def _refusal(data: bytes | str, what: str = "the body") -> str:
    with pytest.raises(AidememoError) as err:
        decode_json(data, what)
    assert err.value.code is ErrorCode.INVALID_COMMAND
    return err.value.message


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


# -- nesting depth ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b"[" * 100_000,
        b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
        b'{"a":' * 100_000,
        b"[{" * 50_000,
        b'[{"k":[' * 30_000,
        b"[" * 60 + b'"x",' + b"[" * 10 + b"]" * 70,
        b'[" "' + b",[" * 100 + b"]" * 100 + b"]",
    ],
    ids=lambda b: f"{b[:12]!r}..{len(b)}",
)
def test_cj4_deep_nesting_is_refused_before_parsing(body: bytes) -> None:
    assert "deeper than 64" in _refusal(body)


def test_cj4_depth_64_is_accepted_and_65_refused_for_arrays_and_objects() -> None:
    assert decode_json(b"[" * 64 + b"]" * 64) is not None
    assert "deeper than 64" in _refusal(b"[" * 65 + b"]" * 65)
    obj64 = b'{"a":' * 63 + b"{}" + b"}" * 63
    assert _depth(decode_json(obj64)) == 64
    assert "deeper than 64" in _refusal(b'{"a":' * 64 + b"{}" + b"}" * 64)


@pytest.mark.parametrize(
    "text",
    [
        '["' + "[" * 200 + '"]',
        '{"' + "{" * 200 + '":"' + "]" * 200 + '"}',
        '["\\"' + "[" * 200 + '\\\\"]',
        '["\\\\", "' + "[" * 200 + '"]',
        '["' + "[" * 100 + '", "' + "]" * 100 + '", "", ""' + ',[""]' * 100 + "]",
        json.dumps({"content": "[[[[" * 100, "more": ["\\[{", '"[']}),
    ],
)
def test_cj4_brackets_inside_strings_do_not_count(text: str) -> None:
    assert decode_json(text.encode()) is not None


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.text(alphabet=st.sampled_from('ab"\\[]{}/\n\u00e9\U0001f600'), max_size=6),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(alphabet='k[]"\\{', max_size=3), inner, max_size=3),
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(value=_VALUES, limit=st.integers(0, 8), ascii_only=st.booleans())
def test_cj4_depth_scan_is_exact_on_valid_json(value: Any, limit: int, ascii_only: bool) -> None:
    for data in (canonical_bytes(value), json.dumps(value, ensure_ascii=ascii_only).encode()):
        assert _depth_exceeds(data, limit) == (_depth(value) > limit)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=80) | st.text(alphabet='[]{}"\\,:1 ', max_size=80).map(str.encode))
def test_cj4_depth_scan_never_undercounts_what_a_parser_would_open(data: bytes) -> None:
    """Any input: the scan's verdict covers the bracket depth counted outside strings, byte by
    byte, up to the first stray closing bracket or backslash outside a string (where a parser
    stops): the most a parser can have open."""
    depth, in_string, escaped, deepest = 0, False, False, 0
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte == 0x5C:
            break  # a backslash outside a string: a parser stops here
        elif byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}":
            depth -= 1
            if depth < 0:
                break
    for limit in range(5):
        if deepest > limit:
            assert _depth_exceeds(data, limit)


# -- lone surrogates ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b'{"payload":{"content":"a\\ud800b"}}', "the string at /payload/content"),
        (b'{"payload":{"content":"\\udfff"}}', "the string at /payload/content"),
        (b'{"payload":{"content":"\\uDBFF\\u0041"}}', "the string at /payload/content"),
        (b'{"payload":{"content":"x\\ude00\\ud83d"}}', "the string at /payload/content"),
        (b'{"payload":{"content":"\xed\xa0\x80"}}', "the string at /payload/content"),
        (b'{"payload":{"k\\ud800":1}}', "an object key at /payload"),
        (b'{"payload":{"k\xed\xb0\x80":1}}', "an object key at /payload"),
        (b'{"a\\ud800":1}', "an object key at the top level"),
        (b'"\\ud800"', "the string at the top level"),
        (b'{"tags":["ok","\\ud800"]}', "the string at /tags/1"),
        (b'{"a/b":{"c~d":"\\ud800"}}', "the string at /a~1b/c~0d"),
        (b'{"\\ud83d\\ude00":{"x":"\\udc00"}}', "the string at /\U0001f600/x"),
        (b'{"a":"\\\\ud800\\udc00"}', "the string at /a holds a lone surrogate U+DC00"),
        (b'{"a":"\\ud800\\\\\\udc00"}', "the string at /a holds a lone surrogate U+D800"),
        (b'{"a":"\\\\\\ud800"}', "the string at /a holds a lone surrogate U+D800"),
    ],
)
def test_cj4_lone_surrogates_are_refused_with_their_json_pointer(body: bytes, where: str) -> None:
    message = _refusal(body)
    assert where in message and "lone surrogate U+D" in message, message
    json.dumps(message).encode("utf-8")  # the message itself is valid text


_PIECES = st.sampled_from(
    [
        "a",
        "\\\\",
        "\\ud800",
        "\\uDBFF",
        "\\udc00",
        "\\uDFFF",
        "\\ud83d\\ude00",
        "\\u0041",
        "u",
        "ud800",
    ]
)


@settings(max_examples=500, deadline=None)
@given(pieces=st.lists(_PIECES, max_size=8), as_key=st.booleans())
@example(pieces=["\\\\", "ud800", "\\udc00"], as_key=False)
def test_cj4_a_lone_surrogate_is_refused_exactly_when_one_decodes(
    pieces: list[str], as_key: bool
) -> None:
    inner = "".join(pieces)
    text = f'{{"{inner}":1}}' if as_key else f'{{"k":"{inner}"}}'
    try:
        parsed = json.loads(text)
    except ValueError:
        return  # a broken escape: not this property's case
    strings = [*parsed, *(v for v in parsed.values() if isinstance(v, str))]
    lone = any(0xD800 <= ord(ch) <= 0xDFFF for text_ in strings for ch in text_)
    if lone:
        assert "lone surrogate" in _refusal(text.encode())
    else:
        assert decode_json(text.encode()) == parsed


def test_cj4_raw_surrogates_in_text_are_refused() -> None:
    assert "the string at /c" in _refusal('{"c":"\ud800"}')
    assert "an object key at the top level" in _refusal('{"\udc00":1}')


@pytest.mark.parametrize(
    "body",
    [
        b'{"a":"\\ud83d\\ude00"}',
        b'{"a":"\\uD83D\\uDE00"}',
        b'{"a":"\\\\ud800"}',
        '{"a":"\U0001f600"}'.encode(),
        b'{"a":"\\uffff\\ud7ff\\ue000"}',
    ],
)
def test_cj4_pairs_and_non_surrogates_are_accepted(body: bytes) -> None:
    value = decode_json(body)
    canonical_bytes(value)  # storable as UTF-8


# -- UTF-8 and the byte order mark ----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"a":"caf\xe9"}', "byte 0xE9 at offset 9"),
        (b"\xff\xfe{}", "byte 0xFF at offset 0"),
        (b'{"a":"\xc3"}', "byte 0xC3 at offset 6"),
        (b'{"a":"\xe2\x82', "ends inside a multi-byte sequence that starts at byte offset 6"),
        (b'{"a":"\xc0\xaf"}', "byte 0xC0 at offset 6"),
        (b'{"a":"\xf4\x90\x80\x80"}', "byte 0xF4 at offset 6"),
    ],
)
def test_cj4_non_utf8_names_the_byte_offset(body: bytes, expected: str) -> None:
    message = _refusal(body)
    assert message.startswith("the body is not UTF-8: ") and expected in message, message
    assert "codec" not in message and "position" not in message


def test_cj4_byte_order_mark_is_refused() -> None:
    assert "byte order mark" in _refusal(b"\xef\xbb\xbf{}")
    assert "byte order mark" in _refusal("\ufeff{}")


def test_cj3_messages_name_what_was_decoded() -> None:
    assert _refusal(b'{"a":', "line 3").startswith("line 3 is not valid JSON: ")
    assert _refusal(b"\xff", "line 3").startswith("line 3 is not UTF-8")
    assert decode_utf8(b"caf\xc3\xa9", "x") == "café"
    with pytest.raises(AidememoError, match=r"x holds a lone surrogate U\+D800"):
        decode_utf8(b"\xed\xa0\x80", "x")


# -- query strings and charset ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("q=%ff", "query parameter q is not UTF-8: byte 0xFF at offset 0"),
        ("q=ab%C3", "query parameter q is not UTF-8: it ends inside"),
        ("q=%ED%A0%80", "query parameter q holds a lone surrogate U+D800"),
        ("%ff=1", "a query parameter name is not UTF-8"),
        ("q=caf\u00e9x", "query parameter q is not UTF-8: byte 0xE9 at offset 3"),
    ],
)
def test_cj4_http3_query_values_follow_the_decoder_rules(raw: str, expected: str) -> None:
    with pytest.raises(AidememoError) as err:
        Query(raw)
    assert err.value.code is ErrorCode.INVALID_COMMAND
    assert expected in err.value.message, err.value.message


def test_http3_query_decoding_keeps_parse_qsl_semantics() -> None:
    query = Query("q=caf%C3%A9+au+lait&flag&empty=&&odd=%zz")
    assert query.text("q") == "café au lait"
    assert query.text("flag") == "" and query.text("empty") == ""
    assert query.text("odd") == "%zz"
    # The origin hands raw target bytes over as latin-1 text: UTF-8 sent unencoded still reads.
    assert Query("q=caf\u00c3\u00a9").text("q") == "café"
    assert Query("q=\u670d").text("q") == "服"  # text beyond latin-1: the core called directly


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("limit=0", "limit must be an integer 1-100"),
        ("limit=101", "limit must be an integer 1-100"),
        ("limit=99999999999999999999", "limit must be an integer 1-100"),
        ("limit=-1", "limit must be an integer 1-100 (plain decimal digits)"),
    ],
)
def test_http3_integer_errors_state_the_real_bounds(raw: str, expected: str) -> None:
    with pytest.raises(AidememoError) as err:
        Query(raw).integer("limit", minimum=1, maximum=100)
    assert err.value.message == expected


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        "application/json;charset=UTF-8",
        'application/json; charset="utf-8"',
        "application/json; charset=utf8",
        "application/json; charset=UTF8",
        "application/json; foo=bar",
    ],
)
def test_http7_utf8_charsets_are_accepted(content_type: str | None) -> None:
    check_media_type(content_type, "application/json")


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json; charset=latin-1",
        "application/json; charset=ISO-8859-1",
        "application/json; charset=utf-16",
        'application/json; charset="utf-16le"',
        "application/json; charset=",
        "text/plain; charset=utf-8",
    ],
)
def test_http7_other_charsets_are_415(content_type: str) -> None:
    with pytest.raises(AidememoError) as err:
        check_media_type(content_type, "application/json")
    assert err.value.code is ErrorCode.UNSUPPORTED_MEDIA_TYPE


@pytest.mark.parametrize("digits", [20, 4300, 4301, 100_000])
def test_cj3_long_integers_get_the_signed_64_bit_message(digits: int) -> None:
    for body in (b"9" * digits, b"-" + b"9" * digits, b'{"n":[' + b"1" * digits + b"]}"):
        message = _refusal(body)
        assert message.endswith("integer outside the signed 64-bit range"), message

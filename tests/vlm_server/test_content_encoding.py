"""Request bodies decode from gzip/deflate within a size cap; every bad body names its encoding."""

import gzip
import zlib

import pytest

from vlm_server.content_encoding import ContentEncodingError, decode_body, parse_encoding

BODY = b'{"id": "a", "command": 4, "speed_mps": 1.0}'


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


@pytest.mark.parametrize(
    ("header", "coding"),
    [(None, "identity"), ("", "identity"), ("identity", "identity"), ("GZIP", "gzip"), (" x-gzip ", "gzip"),
     ("deflate", "deflate")],
)
def test_supported_codings_are_recognised(header, coding):
    assert parse_encoding(header) == coding


@pytest.mark.parametrize("header", ["zstd", "br", "compress", "gzip, gzip", "deflate,identity"])
def test_unsupported_or_stacked_codings_are_refused_by_name(header):
    with pytest.raises(ContentEncodingError, match="Content-Encoding") as raised:
        parse_encoding(header)
    assert repr(header) in str(raised.value) and raised.value.status == 400


@pytest.mark.parametrize(
    ("coding", "encoded"),
    [("identity", BODY), ("gzip", gzip.compress(BODY)), ("deflate", zlib.compress(BODY)),
     ("deflate", raw_deflate(BODY))],
    ids=["identity", "gzip", "zlib-deflate", "raw-deflate"],
)
def test_bodies_decode_to_what_was_sent(coding, encoded):
    assert decode_body(encoded, coding, max_bytes=1024) == BODY


@pytest.mark.parametrize(
    ("coding", "encoded", "message"),
    [
        ("gzip", b"not gzip at all", "not valid gzip"),
        ("gzip", gzip.compress(BODY)[:-12], "ends before its gzip stream"),
        ("gzip", gzip.compress(BODY)[:10], "ends before its gzip stream"),  # the header alone
        ("gzip", b"", "ends before its gzip stream"),
        ("gzip", gzip.compress(BODY) + b"junk", "4 bytes follow"),
        ("deflate", zlib.compress(BODY)[:-6], "ends before its deflate stream"),
        ("deflate", b"\xff\xff\xff\xff", "not valid deflate"),
    ],
    ids=["garbage", "truncated", "header-only", "empty", "trailing-bytes", "truncated-deflate", "garbage-deflate"],
)
def test_corrupt_bodies_are_400_naming_the_encoding(coding, encoded, message):
    with pytest.raises(ContentEncodingError, match=f"Content-Encoding {coding}") as raised:
        decode_body(encoded, coding, max_bytes=1024)
    assert message in str(raised.value) and raised.value.status == 400


def test_a_bomb_is_413_without_inflating_it_whole():
    bomb = gzip.compress(b"0" * 5_000_000)  # 5 MB of zeros in ~5 KB
    with pytest.raises(ContentEncodingError, match="more than the limit of 1024 bytes") as raised:
        decode_body(bomb, "gzip", max_bytes=1024)
    assert raised.value.status == 413


def test_a_body_exactly_at_the_limit_is_accepted():
    assert decode_body(gzip.compress(b"x" * 1024), "gzip", max_bytes=1024) == b"x" * 1024

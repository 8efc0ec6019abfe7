"""Decode a request body's ``Content-Encoding`` (gzip, deflate, identity), bounded and checked.

The server reads bodies raw (``auto_decompress=False``) and decodes them here because aiohttp's
own decoding accepts a gzip stream cut short (the handler then sees an empty or half JSON body
and blames the JSON) and answers an encoding it cannot decode (zstd, br without their packages)
with a plain-text 400 and a logged traceback. Here each of those is an error that names the
encoding, and the decoded size is capped before it is allocated (a zip bomb costs nothing).
"""

from __future__ import annotations

import zlib

SUPPORTED_ENCODINGS = ("identity", "gzip", "deflate")
HEADER = "Content-Encoding"

_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip header and trailer
_ZLIB_WBITS = zlib.MAX_WBITS  # RFC 9110's "deflate" is zlib-wrapped (RFC 1950)
_RAW_DEFLATE_WBITS = -zlib.MAX_WBITS  # some clients send bare RFC 1951 data; accepted, as aiohttp did


class ContentEncodingError(ValueError):
    """A body the server cannot decode; ``status`` is 400 (bad or unsupported) or 413 (too big)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def parse_encoding(header: str | None) -> str:
    """The one coding named by a ``Content-Encoding`` header value (``identity`` when absent).

    Raises:
        ContentEncodingError: for an unsupported coding or a list of codings (stacked
            encodings are legal HTTP, but no client of this server needs them).
    """
    if header is None or not header.strip():
        return "identity"
    codings = [c.strip().lower() for c in header.split(",") if c.strip()]
    if len(codings) > 1:
        raise ContentEncodingError(
            f"{HEADER} {header!r}: stacked encodings are not supported; send one of {', '.join(SUPPORTED_ENCODINGS)}"
        )
    coding = codings[0] if codings else "identity"
    if coding == "x-gzip":  # RFC 9110 §8.4.1.3: recipients should treat x-gzip as gzip
        coding = "gzip"
    if coding not in SUPPORTED_ENCODINGS:
        raise ContentEncodingError(
            f"{HEADER} {header!r} is not supported; send one of {', '.join(SUPPORTED_ENCODINGS)}"
        )
    return coding


def decode_body(raw: bytes, coding: str, max_bytes: int) -> bytes:
    """``raw`` decoded from ``coding`` (from :func:`parse_encoding`), at most ``max_bytes`` long.

    Raises:
        ContentEncodingError: 400 when the data is not valid ``coding`` or its stream is cut
            short or followed by trailing bytes; 413 when it decodes to more than ``max_bytes``.
    """
    if coding == "identity":
        return raw
    if coding == "gzip":
        return _inflate(raw, _GZIP_WBITS, coding, max_bytes)
    if coding == "deflate":
        wbits = _ZLIB_WBITS if _has_zlib_header(raw) else _RAW_DEFLATE_WBITS
        return _inflate(raw, wbits, coding, max_bytes)
    raise ContentEncodingError(f"{HEADER} {coding!r} is not supported")


def _has_zlib_header(raw: bytes) -> bool:
    """RFC 1950: method 8 (deflate) in the low nibble, and the 16-bit header a multiple of 31."""
    return len(raw) >= 2 and raw[0] & 0x0F == 8 and (raw[0] << 8 | raw[1]) % 31 == 0


def _inflate(raw: bytes, wbits: int, coding: str, max_bytes: int) -> bytes:
    decompressor = zlib.decompressobj(wbits)
    try:
        decoded = decompressor.decompress(raw, max_bytes + 1)
    except zlib.error as exc:
        raise ContentEncodingError(f"{HEADER} {coding}: the body is not valid {coding} data ({exc})") from None
    if len(decoded) > max_bytes:
        raise ContentEncodingError(
            f"{HEADER} {coding}: the body decodes to more than the limit of {max_bytes} bytes", status=413
        )
    if not decompressor.eof:
        raise ContentEncodingError(
            f"{HEADER} {coding}: the body ends before its {coding} stream does ({len(raw)} bytes received; "
            "truncated upload?)"
        )
    if decompressor.unused_data:
        raise ContentEncodingError(
            f"{HEADER} {coding}: {len(decompressor.unused_data)} bytes follow the end of the {coding} stream"
        )
    return decoded

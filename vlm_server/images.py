"""Image wire format: RGB uint8 arrays as base64 PNG or base64 raw bytes with a shape.

Raw is the fast path for env workers on the same host (no compression); PNG is ~5-10x
smaller for BEV images and suits remote servers.
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import Any, Literal

import numpy as np
from PIL import Image, UnidentifiedImageError

ImageFormat = Literal["raw", "png"]


def encode_image(
    image: np.ndarray, image_format: ImageFormat = "raw"
) -> dict[str, Any]:
    """Wire form of an ``[H, W, 3]`` uint8 RGB image."""
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(
            f"image must be [H, W, 3] uint8 RGB, got shape {image.shape} dtype {image.dtype}"
        )
    if image_format == "raw":
        data = base64.b64encode(np.ascontiguousarray(image).tobytes()).decode("ascii")
        return {
            "format": "raw",
            "data": data,
            "shape": list(image.shape),
            "dtype": "uint8",
        }
    if image_format == "png":
        return {
            "format": "png",
            "data": base64.b64encode(png_bytes(image)).decode("ascii"),
        }
    raise ValueError(f"image_format must be 'raw' or 'png', got {image_format!r}")


def png_bytes(image: np.ndarray) -> bytes:
    """PNG encoding of an ``[H, W, 3]`` uint8 RGB image (fast compression level)."""
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def decode_base64(data: str) -> bytes:
    """Strict base64 decoding; a truncated or corrupted string is a ``ValueError``."""
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(
            f"data is not valid base64 (truncated or corrupted): {exc}"
        ) from None


class DecodeBudget:
    """Decoded bytes one request may still produce: a few KB of flat PNG inflate to MBs."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.spent = 0

    def spend(self, height: int, width: int) -> None:
        """Count an ``[H, W, 3]`` image; ``ValueError`` once the request exceeds the budget."""
        self.spent += height * width * 3
        if self.spent > self.max_bytes:
            raise ValueError(
                f"the request's images decode to more than max_decoded_image_bytes="
                f"{self.max_bytes} (send fewer or smaller images per request)"
            )


def decode_raw(
    data: str,
    shape: tuple[int, int, int],
    max_side: int,
    budget: DecodeBudget | None = None,
) -> np.ndarray:
    """``[H, W, 3]`` uint8 array from base64 raw bytes; sizes are checked before decoding."""
    height, width, channels = shape
    if channels != 3:
        raise ValueError(f"shape must be [H, W, 3] (RGB), got {list(shape)}")
    if not (0 < height <= max_side and 0 < width <= max_side):
        raise ValueError(
            f"image sides must be in 1..{max_side} px, got {height}x{width}"
        )
    expected_chars = 4 * ((height * width * 3 + 2) // 3)
    if len(data) != expected_chars:
        raise ValueError(
            f"data has {len(data)} base64 chars, shape {list(shape)} uint8 needs {expected_chars} (truncated?)"
        )
    if budget is not None:
        budget.spend(height, width)
    raw = decode_base64(data)
    return np.frombuffer(raw, dtype=np.uint8).reshape(shape)


def decode_png(
    data: str, max_side: int, budget: DecodeBudget | None = None
) -> np.ndarray:
    """``[H, W, 3]`` uint8 array from a base64 8-bit RGB PNG; other modes are refused.

    Raises:
        ValueError: the client's data is no base64, no PNG, truncated or corrupt, too large, or
            not 8-bit RGB. Any other exception is a bug: the server's error middleware answers
            500 and logs its traceback.
    """
    raw = decode_base64(data)
    try:
        with Image.open(io.BytesIO(raw), formats=["PNG"]) as img:
            width, height = img.size
            if not (0 < height <= max_side and 0 < width <= max_side):
                raise ValueError(
                    f"image sides must be in 1..{max_side} px, got {height}x{width}"
                )
            if img.mode != "RGB":
                raise ValueError(f"PNG must be 8-bit RGB, got mode {img.mode!r}")
            if budget is not None:
                budget.spend(height, width)
            img.load()
            return np.asarray(img, dtype=np.uint8)
    except UnidentifiedImageError:
        raise ValueError("data is not a decodable PNG: it starts with no complete PNG header") from None
    # what PIL raises for truncated or corrupt data (nothing here touches a file, so an OSError
    # is PIL's), and for a header claiming billions of pixels
    except (OSError, Image.DecompressionBombError) as exc:
        raise ValueError(f"data is not a decodable PNG: {exc}") from None

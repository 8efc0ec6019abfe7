"""HTTP request bodies (pydantic, ``extra="forbid"``) and their conversion to backend items.

A body is one item object or ``{"items": [...]}``. Validation context keys:
``max_side`` (largest image side, px), ``image_hw`` (the backend's required ``(H, W)`` or
None), ``history_frames`` (past frames a CLIP item must send, or None) and ``budget`` (the
request's ``DecodeBudget``, or None). Errors carry the location of the bad field, e.g.
``items[3].image.shape``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from vlm_server.actions import RoadOption
from vlm_server.backends.base import AdviseItem, ClipItem
from vlm_server.images import decode_png, decode_raw

# strict: a JSON number only (true or "1.5" is a caller's bug, not a speed)
FiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]
UnitFloat = Annotated[float, Field(strict=True, ge=-1.0, le=1.0, allow_inf_nan=False)]
ItemId = Annotated[str, Field(min_length=1, max_length=256)]
COMMAND_VALUES = tuple(int(option) for option in RoadOption)


class ImagePayload(BaseModel):
    """RGB BEV image: base64 PNG, or base64 raw uint8 bytes with ``shape = [H, W, 3]``."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["raw", "png"]
    data: str = Field(min_length=1)
    shape: tuple[StrictInt, StrictInt, StrictInt] | None = None
    dtype: Literal["uint8"] | None = None
    _array: np.ndarray = PrivateAttr()

    @model_validator(mode="after")
    def _decode(self, info: ValidationInfo) -> ImagePayload:
        context = info.context or {}
        max_side = int(context.get("max_side", 1024))
        budget = context.get("budget")
        if self.format == "raw":
            if self.shape is None or self.dtype is None:
                raise ValueError(
                    "raw images need 'shape' [H, W, 3] and 'dtype' 'uint8'"
                )
            self._array = decode_raw(self.data, self.shape, max_side, budget)
        else:
            if self.shape is not None or self.dtype is not None:
                raise ValueError(
                    "png images carry no 'shape'/'dtype' (the PNG header has them)"
                )
            self._array = decode_png(self.data, max_side, budget)
        expected_hw = context.get("image_hw")
        if expected_hw is not None and tuple(self._array.shape[:2]) != tuple(
            expected_hw
        ):
            height, width = self._array.shape[:2]
            raise ValueError(
                f"image is {height}x{width} px, this backend expects {expected_hw[0]}x{expected_hw[1]}"
            )
        return self

    @property
    def array(self) -> np.ndarray:
        """Decoded ``[H, W, 3]`` uint8 RGB (read-only view)."""
        return self._array


class _ItemBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: ItemId
    command: StrictInt = Field(description="RoadOption value: -1 (VOID), 1..6")
    speed_mps: FiniteFloat = Field(ge=-100.0, le=100.0)

    @field_validator("command")
    @classmethod
    def _check_command(cls, command: int) -> int:
        if command not in COMMAND_VALUES:
            raise ValueError(
                f"command must be a RoadOption value {COMMAND_VALUES}, got {command}"
            )
        return command


class AdviseItemBody(_ItemBase):
    """One ``/v1/advise`` item; ``state`` is free-form privileged state for an expert."""

    image: ImagePayload | None = None
    state: dict[str, Any] | None = None

    def to_item(self) -> AdviseItem:
        image = None if self.image is None else self.image.array
        return AdviseItem(self.id, image, self.command, self.speed_mps, self.state)


class ClipItemBody(_ItemBase):
    """One ``/v1/clip/score`` item; ``action`` is the executed ``(acc, steer)``.

    ``history`` holds past RGB BEVs of the same episode, oldest first, for a model whose image
    input stacks them (``vlm_server.clip_inputs``); a backend that says how many it reads
    (``history_frames``) refuses any other count.
    """

    image: ImagePayload
    action: tuple[UnitFloat, UnitFloat]
    history: list[ImagePayload] | None = Field(default=None, max_length=8)

    @model_validator(mode="after")
    def _check_history(self, info: ValidationInfo) -> ClipItemBody:
        expected = (info.context or {}).get("history_frames")
        sent = len(self.history or [])
        if expected is not None and sent != expected:
            raise ValueError(
                f"history: this backend's model reads {expected} past BEV frame(s) besides the image "
                f"(oldest first), got {sent}"
            )
        return self

    def to_item(self) -> ClipItem:
        history = tuple(frame.array for frame in self.history or ())
        return ClipItem(
            self.id, self.image.array, self.command, self.speed_mps, self.action, history
        )


class AdviseBatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[AdviseItemBody] = Field(min_length=1)


class ClipBatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[ClipItemBody] = Field(min_length=1)


def error_location(loc: tuple[Any, ...], root: str = "body") -> str:
    """``('items', 3, 'image', 'shape')`` -> ``'items[3].image.shape'`` (``root`` if empty)."""
    text = ""
    for part in loc:
        text += (
            f"[{part}]"
            if isinstance(part, int)
            else (f".{part}" if text else str(part))
        )
    return text or root


def error_message(error: Any) -> str:
    """A pydantic error's message without pydantic's ``"Value error, "`` prefix."""
    if error.get("type") == "value_error" and "error" in error.get("ctx", {}):
        return str(error["ctx"]["error"])
    return str(error["msg"])

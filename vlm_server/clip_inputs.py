"""What a CLIP reward model conditions on: its context definition and its image input.

A fine-tuned checkpoint records both, and a server is configured with both, so a model trained
to read one thing is never served another (``clip_checkpoint.check_compatible`` refuses it,
naming the two).

- **Context** (``CONTEXTS``): the variables of the image-blind prior p(a | context) that a
  ``logit-adjusted`` model was trained to score *beyond* (found_rl.clip.loss). The text anchors
  are always the 30 of the frame's (command, speed bin) group (METHOD §3); the context only says
  which prior the model's logits are a residual to.
- **Image input** (``IMAGE_INPUTS``): the RGB BEV of o_t alone, or stacked with the RGB BEVs of
  the same episode at the ages of the policy's BEV history (1.5, 1.0 and 0.5 s before o_t), so the
  image tower sees the ego's own motion (one frame shows other actors' tinted history but not
  how the road moves under the ego).

Plain data and numpy only (the CLI reads these names without importing torch).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vlm_server.anchors import COMMAND_PHRASES, SPEED_PHRASES
from vlm_server.errors import UsageError


@dataclass(frozen=True)
class Context:
    """A definition of the prior's context.

    Attributes:
        name: the value in checkpoints and ``--clip-option context=``.
        description: what the context is made of.
        uses_speed: whether the speed bin is part of it (else the command alone).
    """

    name: str
    description: str
    uses_speed: bool

    @property
    def size(self) -> int:
        return len(COMMAND_PHRASES) * (len(SPEED_PHRASES) if self.uses_speed else 1)

    def ids(self, command_rows: np.ndarray, speed_bins: np.ndarray) -> np.ndarray:
        """``[N]`` context id of each frame."""
        rows = np.asarray(command_rows, dtype=np.int64)
        if not self.uses_speed:
            return rows
        return rows * len(SPEED_PHRASES) + np.asarray(speed_bins, dtype=np.int64)


CONTEXTS: dict[str, Context] = {
    "command-speed": Context("command-speed", "command x speed bin (the 24 anchor groups of METHOD §3)", True),
    "command": Context("command", "command only (6 groups)", False),
}
DEFAULT_CONTEXT = "command-speed"

OBJECTIVES = ("logit-adjusted", "contrastive")
"""How a checkpoint was trained: its softmax is the image's evidence beyond p(a | context)
(``logit-adjusted``), or p(a | image, context) itself (``contrastive``, the earlier checkpoints)."""


@dataclass(frozen=True)
class ImageInput:
    """What the image tower is fed.

    Attributes:
        name: the value in checkpoints and ``--clip-option image_input=``.
        ages_s: ages of the stacked RGB BEVs, seconds before o_t, oldest first (0.0 is o_t).
    """

    name: str
    ages_s: tuple[float, ...]

    @property
    def frames(self) -> int:
        return len(self.ages_s)

    @property
    def channels(self) -> int:
        return 3 * self.frames

    @property
    def history_ages_s(self) -> tuple[float, ...]:
        """The past frames a request must send besides o_t (oldest first)."""
        return self.ages_s[:-1]

    def describe(self) -> str:
        if self.frames == 1:
            return f"{self.name!r} (the RGB BEV of o_t)"
        ages = ", ".join(f"{age:g}" for age in self.history_ages_s)
        return f"{self.name!r} (the RGB BEV of o_t stacked with those {ages} s before)"


IMAGE_INPUTS: dict[str, ImageInput] = {
    "rgb": ImageInput("rgb", (0.0,)),
    "rgb-history": ImageInput("rgb-history", (1.5, 1.0, 0.5, 0.0)),  # the policy BEV's history_s
}
DEFAULT_IMAGE_INPUT = "rgb"


def context_named(name: str, where: str) -> Context:
    """The context definition called ``name``; ``where`` names the field in the error."""
    if name not in CONTEXTS:
        raise UsageError(f"{where}: context {name!r} is not one of {sorted(CONTEXTS)}")
    return CONTEXTS[name]


def image_input_named(name: str, where: str) -> ImageInput:
    """The image input called ``name``; ``where`` names the field in the error."""
    if name not in IMAGE_INPUTS:
        raise UsageError(f"{where}: image input {name!r} is not one of {sorted(IMAGE_INPUTS)}")
    return IMAGE_INPUTS[name]

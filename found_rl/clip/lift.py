"""Does the reward model read the image? Its AUC against the caption prior's, per context, shuffled.

The caption alone carries signal (the expert mostly accelerates when slow), so a score's AUC
(``found_rl.clip.quality``) says little until it is set against the image-blind prior p(a | command,
speed) scored the same way. All of these score the model's p(a | image, context)
(``found_rl.clip.evaluate.model_distribution``), whose AUC is ``model_auc``:

- ``auc_lift = model_auc − prior_auc`` over all held-out frames, and per context (command × speed
  bin; a context with fewer than ``min_context_frames`` frames is skipped and named, its AUC would
  be noise);
- ``shuffled_auc``: the same scorer with each frame's image swapped for that of another held-out
  frame of the same context, so command, speed and action stay and only the image–action pairing
  is broken. A scorer that reads the image loses its lift under the shuffle; one that reads only
  the caption keeps it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from found_rl.clip.quality import ScoredBonuses
from vlm_server.anchors import COMMAND_PHRASES, SPEED_PHRASES

SPEED_NAMES = ("stopped", "slow", "moderate", "high")
MIN_CONTEXT_FRAMES = 30


def context_name(group: int) -> str:
    """``"turn left at the intersection / slow"`` for an anchor group ``command_row * 4 + speed_bin``."""
    row, speed = divmod(int(group), len(SPEED_PHRASES))
    return f"{COMMAND_PHRASES[row]} / {SPEED_NAMES[speed]}"


@dataclass(frozen=True)
class ContextAuc:
    """AUC of the scorer and of the prior on the frames of one context."""

    frames: int
    auc: float
    prior_auc: float
    auc_lift: float


@dataclass(frozen=True)
class ImageEvidence:
    """What the image adds beyond the caption prior (see the module docstring)."""

    model_auc: float
    prior_auc: float
    auc_lift: float
    shuffled_auc: float
    per_context: dict[str, ContextAuc]
    skipped_contexts: dict[str, int]
    """context name -> its frame count, for contexts under ``min_context_frames``"""
    min_context_frames: int

    def to_json(self) -> dict:
        return asdict(self)


def per_context_auc(
    model: ScoredBonuses, prior: ScoredBonuses, groups: np.ndarray, min_frames: int
) -> tuple[dict[str, ContextAuc], dict[str, int]]:
    """``(AUC per context with enough frames, frame count of each skipped context)``, by frame count."""
    measured: dict[str, ContextAuc] = {}
    skipped: dict[str, int] = {}
    values, counts = np.unique(groups, return_counts=True)
    for group, count in sorted(zip(values, counts), key=lambda pair: (-pair[1], pair[0])):
        name = context_name(int(group))
        if count < min_frames:
            skipped[name] = int(count)
            continue
        frames = groups == group
        model_auc, prior_auc = model.auc_of(frames), prior.auc_of(frames)
        measured[name] = ContextAuc(int(count), model_auc, prior_auc, model_auc - prior_auc)
    return measured, skipped


def shuffle_within_groups(groups: np.ndarray, seed: int) -> np.ndarray:
    """``order`` such that frame ``i`` takes the image of frame ``order[i]``, of the same group.

    Each group is permuted at random (a frame alone in its group keeps its own image).
    """
    rng = np.random.default_rng(seed)
    order = np.arange(len(groups))
    for group in np.unique(groups):
        members = np.flatnonzero(groups == group)
        order[members] = rng.permutation(members)
    return order


def image_evidence(
    model: ScoredBonuses,
    prior: ScoredBonuses,
    shuffled: ScoredBonuses,
    groups: np.ndarray,
    min_context_frames: int = MIN_CONTEXT_FRAMES,
) -> ImageEvidence:
    """Lift over the prior, per context, and the AUC under the within-context image shuffle."""
    everything = np.ones(len(groups), dtype=bool)
    model_auc, prior_auc = model.auc_of(everything), prior.auc_of(everything)
    per_context, skipped = per_context_auc(model, prior, groups, min_context_frames)
    return ImageEvidence(
        model_auc=model_auc,
        prior_auc=prior_auc,
        auc_lift=model_auc - prior_auc,
        shuffled_auc=shuffled.auc_of(everything),
        per_context=per_context,
        skipped_contexts=skipped,
        min_context_frames=min_context_frames,
    )

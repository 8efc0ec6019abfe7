"""Reward quality of a CLIP scorer (pure numpy): does the bonus tell the expert's action from far ones?

Given the scorer's softmax ``p`` over the 30 anchors of each held-out frame's (command, speed)
group and the expert's action ``a``:

- ``auc``: the probability that the bonus (METHOD §3) of the expert's action beats the bonus of
  an action outside N(a) on a random frame (Mann-Whitney, ties count half). Every action
  outside N(a) is scored, which is uniform sampling of far actions without its noise. The
  bonus normalises margins with the moments of all margins scored here, as the server's
  running statistics would after seeing them. 0.5 is no signal. It cannot go far below 0.5:
  ``m`` is clipped at 0, so a scorer that prefers a far action gives the expert 0 and all
  but that one far action 0 as well (ties).
- ``auc_margin``: the same on the raw margin ``m`` (no clipping ties).
- ``top1``: ``argmax p == a`` (the 30-way classification); ``top1_neighbourhood``: argmax in N(a).
- per-command ``top1`` and the bonus distribution for expert and far actions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from vlm_server.anchors import (
    BONUS_SCALE,
    COMMAND_PHRASES,
    NEIGHBOUR_MASK,
    NUM_ACTIONS,
    alignment_margin,
    normalised_bonuses,
)
from vlm_server.running_stats import RunningMoments

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


@dataclass(frozen=True)
class Distribution:
    """Summary of a sample of bonuses."""

    count: int
    mean: float
    std: float
    quantiles: dict[str, float]
    at_max: float  # share clipped at +scale
    at_min: float  # share clipped at -scale

    @classmethod
    def of(cls, values: np.ndarray) -> Distribution:
        values = np.asarray(values, dtype=np.float64)
        if values.size == 0:
            return cls(0, float("nan"), float("nan"), {}, float("nan"), float("nan"))
        return cls(
            count=int(values.size),
            mean=float(values.mean()),
            std=float(values.std()),
            quantiles={f"p{round(q * 100):02d}": float(np.quantile(values, q)) for q in QUANTILES},
            at_max=float(np.mean(values >= BONUS_SCALE - 1e-12)),
            at_min=float(np.mean(values <= -BONUS_SCALE + 1e-12)),
        )


@dataclass(frozen=True)
class RewardQuality:
    """What ``found-rl clip evaluate`` reports (see the module docstring)."""

    frames: int
    auc: float
    auc_margin: float
    top1: float
    top1_neighbourhood: float
    per_command_top1: dict[str, float]
    per_command_frames: dict[str, int]
    bonus_expert: Distribution
    bonus_far: Distribution
    extra: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


def auc(positives: np.ndarray, negatives: np.ndarray) -> float:
    """P(positive > negative) + P(tie) / 2 over all pairs (Mann-Whitney U / (n_pos n_neg))."""
    positives = np.asarray(positives, dtype=np.float64)
    negatives = np.asarray(negatives, dtype=np.float64)
    if positives.size == 0 or negatives.size == 0:
        raise ValueError("auc needs at least one positive and one negative")
    values = np.concatenate([positives, negatives])
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = np.arange(1, values.size + 1)
    # average ranks over ties
    sorted_values = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    ends = np.r_[starts[1:], values.size]
    for start, end in zip(starts, ends):
        if end - start > 1:
            ranks[order[start:end]] = (start + 1 + end) / 2.0
    rank_sum = ranks[: positives.size].sum()
    u = rank_sum - positives.size * (positives.size + 1) / 2.0
    return float(u / (positives.size * negatives.size))


@dataclass(frozen=True)
class ScoredBonuses:
    """The bonus (METHOD §3) of each frame's expert action and of every action outside its N(a).

    Attributes:
        expert, expert_margin: ``[N]`` bonus and raw margin of the expert's action per frame.
        far, far_margin: ``[M]`` bonus and raw margin of each far action scored.
        frame_of_far: ``[M]`` the frame each far action belongs to.
    """

    expert: np.ndarray
    expert_margin: np.ndarray
    far: np.ndarray
    far_margin: np.ndarray
    frame_of_far: np.ndarray

    def auc_of(self, frames: np.ndarray) -> float:
        """AUC restricted to the frames where ``frames`` (``[N]`` bool) is True."""
        return auc(self.expert[frames], self.far[frames[self.frame_of_far]])


def scored_bonuses(probs: np.ndarray, action_ids: np.ndarray) -> ScoredBonuses:
    """Bonuses of the expert and all far actions, normalised by the moments of all their margins."""
    expert_margin, far_margin, frame_of_far = _margins(probs, action_ids)
    all_margins = np.concatenate([expert_margin, far_margin])
    mean, var = all_margins.mean(), all_margins.var()
    return ScoredBonuses(
        normalised_bonuses(expert_margin, mean, var), expert_margin, normalised_bonuses(far_margin, mean, var),
        far_margin, frame_of_far,
    )


def learner_bonuses(probs: np.ndarray, action_ids: np.ndarray) -> ScoredBonuses:
    """Bonuses as a freshly started server hands them to a learner that drives as the expert.

    Frames in order, each expert action's margin first updates the server's running moments
    (``RunningMoments``, as ``OpenClipScorer.score_batch`` does) and is normalised by them, its own
    sample included; each far action of that frame gets the bonus the same moments would give it
    had the learner taken it. Unlike ``scored_bonuses``, the moments see only executed actions
    and move along the frames, and the first frames are normalised by very few samples.
    """
    expert_margin, far_margin, frame_of_far = _margins(probs, action_ids)
    stats = RunningMoments()
    snapshots = [stats.update(float(margin)) for margin in expert_margin]
    mean = np.array([snapshot.mean for snapshot in snapshots])
    var = np.array([snapshot.var for snapshot in snapshots])
    return ScoredBonuses(
        normalised_bonuses(expert_margin, mean, var), expert_margin,
        normalised_bonuses(far_margin, mean[frame_of_far], var[frame_of_far]), far_margin, frame_of_far,
    )


def _margins(probs: np.ndarray, action_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(expert margins [N], far actions' margins [M], frame of each far action [M])`` (METHOD §3)."""
    expert_margin = alignment_margin(probs, action_ids)
    frame_of_far, far_action = np.nonzero(~NEIGHBOUR_MASK[action_ids])  # every action outside N(a)
    return expert_margin, alignment_margin(probs[frame_of_far], far_action), frame_of_far


def check_probabilities(probs: np.ndarray, action_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(probs, action_ids)`` as float64 and int64, refused unless ``[N, 30]`` with N > 0."""
    probs = np.asarray(probs, dtype=np.float64)
    action_ids = np.asarray(action_ids, dtype=np.int64)
    n = len(action_ids)
    if probs.shape != (n, NUM_ACTIONS) or n == 0:
        raise ValueError(f"probs: expected [N, {NUM_ACTIONS}] with N = {n} > 0, got {probs.shape}")
    return probs, action_ids


def reward_quality(probs: np.ndarray, action_ids: np.ndarray, command_rows: np.ndarray) -> RewardQuality:
    """Score a scorer's probabilities against the expert's actions.

    Args:
        probs: ``[N, 30]`` softmax over each frame's 30 action anchors.
        action_ids: ``[N]`` the expert action's anchor per frame.
        command_rows: ``[N]`` row of the command in ``COMMAND_PHRASES`` per frame.
    """
    probs, action_ids = check_probabilities(probs, action_ids)
    command_rows = np.asarray(command_rows, dtype=np.int64)
    n = len(action_ids)
    scored = scored_bonuses(probs, action_ids)
    predicted = probs.argmax(axis=1)
    is_top1 = predicted == action_ids
    per_command_top1, per_command_frames = {}, {}
    for row, phrase in enumerate(COMMAND_PHRASES):
        mask = command_rows == row
        if mask.any():
            per_command_top1[phrase] = float(is_top1[mask].mean())
            per_command_frames[phrase] = int(mask.sum())
    return RewardQuality(
        frames=n,
        auc=auc(scored.expert, scored.far),
        auc_margin=auc(scored.expert_margin, scored.far_margin),
        top1=float(is_top1.mean()),
        top1_neighbourhood=float(NEIGHBOUR_MASK[action_ids, predicted].mean()),
        per_command_top1=per_command_top1,
        per_command_frames=per_command_frames,
        bonus_expert=Distribution.of(scored.expert),
        bonus_far=Distribution.of(scored.far),
    )


def prior_probabilities(train_groups: np.ndarray, train_actions: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """``[N, 30]`` image-blind baseline: action frequencies of each (command, speed) group in training.

    A scorer must beat this to show that it reads the image and not only the caption prior.
    Groups unseen in training fall back to the overall frequencies (Laplace-smoothed).
    """
    num_groups = int(max(np.max(train_groups, initial=0), np.max(groups, initial=0))) + 1
    return prior_table(train_groups, train_actions, num_groups)[groups]


def prior_table(train_contexts: np.ndarray, train_actions: np.ndarray, num_contexts: int) -> np.ndarray:
    """``[num_contexts, 30]`` p(a | context): Laplace-smoothed training frequencies, rows sum to 1.

    A context never seen in training takes the overall frequencies.
    """
    raw = np.zeros((num_contexts, NUM_ACTIONS))
    np.add.at(raw, (np.asarray(train_contexts, np.int64), np.asarray(train_actions, np.int64)), 1.0)
    overall = 1.0 + raw.sum(axis=0)
    seen = raw.sum(axis=1) > 0
    table = np.where(seen[:, None], 1.0 + raw, overall[None, :])
    return table / table.sum(axis=1, keepdims=True)

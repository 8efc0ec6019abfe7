"""The diagnostic ladder: where, between the image and the learner's bonus, the image's signal is lost.

Issue 32. Every rung is scored on the same held-out frames, against the same image-blind prior
p(a | command, speed bin), with the same within-context image shuffle, so the rungs differ only
in what produces the score:

- (a) **probe**: the supervised action probe (``found_rl.clip.probe``), p(a | image, context) from
  plain cross-entropy. How much the image can tell beyond the prior with this data and resolution.
- (b) **CLIP model**: the fine-tuned CLIP model's p(a | image, context) (for a logit-adjusted
  checkpoint, its served evidence times the prior; ``evaluate.model_distribution``).
- (c) **served bonus**: the METHOD §3 bonus of what the server serves (for a logit-adjusted
  checkpoint, the image's evidence alone), normalised with the moments of all margins scored,
  as ``clip evaluate``'s ``auc``; and the **learner's bonus**: the same normalised by the
  server's running moments, frame after frame (``quality.learner_bonuses``).

Each rung reports its AUC (expert action against the actions outside N(a), on the bonus of its
distribution), the prior's AUC, the lift over it, the AUC with the images shuffled within
contexts, top-1 and the lift per context. Where (a) beats the prior and (b) does not, the
contrastive training loses the signal; where (b) does and (c) does not, the serving does
(the residual, the margin's clipping at 0, the normalisation); where (a) does not, the data or
the image does.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from found_rl.clip.evaluate import HeldOutScores
from found_rl.clip.lift import MIN_CONTEXT_FRAMES, ContextAuc, image_evidence
from found_rl.clip.quality import ScoredBonuses, learner_bonuses, scored_bonuses


@dataclass(frozen=True)
class Rung:
    """One rung's numbers on the held-out frames.

    Attributes:
        name: ``"(a) probe"``, ``"(b) CLIP model"``, ``"(c) served bonus"`` or ``"(c) learner's bonus"``.
        scores: what is scored, in words.
        auc: AUC of the rung's bonus, expert action against the actions outside N(a).
        prior_auc, auc_lift: the image-blind prior's AUC, and ``auc − prior_auc``.
        shuffled_auc: ``auc`` with each frame's image swapped for another of its context.
        top1: the 30-way top-1 of the rung's distribution (None where the rung has no other
            distribution than the rung above it).
        per_context: AUC, prior AUC and lift per (command × speed bin) context with enough frames.
    """

    name: str
    scores: str
    auc: float
    prior_auc: float
    auc_lift: float
    shuffled_auc: float
    top1: float | None
    per_context: dict[str, ContextAuc]

    def to_json(self) -> dict:
        return asdict(self)


def diagnostic_ladder(
    probe: HeldOutScores,
    clip: HeldOutScores,
    probe_label: str,
    clip_label: str,
    min_context_frames: int = MIN_CONTEXT_FRAMES,
) -> list[Rung]:
    """The four rungs from a probe's and a CLIP checkpoint's scores of the same held-out frames.

    Args:
        probe, clip: ``evaluate.score_held_out`` of each on the same frames, seed and towns.
        probe_label, clip_label: how each was trained, for the ``scores`` column.
        min_context_frames: contexts with fewer frames get no per-context row.

    Raises:
        ValueError: the two scored other frames, or either lacks a prior (a caller's bug:
            ``score_held_out`` of held-out episodes always has one).
    """
    if not np.array_equal(probe.frames.caption_ids, clip.frames.caption_ids):
        raise ValueError("the probe and the CLIP checkpoint were scored on different frames")
    for scores in (probe, clip):
        if scores.prior is None or scores.model is None or scores.shuffled_model is None:
            raise ValueError("a ladder rung needs the training frames' prior (score held-out episodes)")
    frames = clip.frames
    actions = frames.action_ids
    prior = scored_bonuses(clip.prior, actions)

    def rung(name: str, scores: str, bonuses: ScoredBonuses, shuffled: ScoredBonuses, probs: np.ndarray | None) -> Rung:
        evidence = image_evidence(bonuses, prior, shuffled, frames.groups, min_context_frames)
        top1 = None if probs is None else float(np.mean(probs.argmax(axis=1) == actions))
        return Rung(
            name, scores, evidence.model_auc, evidence.prior_auc, evidence.auc_lift, evidence.shuffled_auc, top1,
            evidence.per_context,
        )

    return [
        rung("(a) probe", f"p(a | image, context): {probe_label}",
             scored_bonuses(probe.model, actions), scored_bonuses(probe.shuffled_model, actions), probe.model),
        rung("(b) CLIP model", f"p(a | image, context): {clip_label}",
             scored_bonuses(clip.model, actions), scored_bonuses(clip.shuffled_model, actions), clip.model),
        rung("(c) served bonus", "bonus of the served softmax, moments of all margins (clip evaluate's auc)",
             scored_bonuses(clip.served, actions), scored_bonuses(clip.shuffled_served, actions), clip.served),
        rung("(c) learner's bonus", "the same, running moments of the expert's margins in frame order",
             learner_bonuses(clip.served, actions), learner_bonuses(clip.shuffled_served, actions), None),
    ]

"""Reward quality of a fine-tuned checkpoint on held-out expert frames, scored by the served code.

The frames are scored by ``vlm_server``'s own ``OpenClipScorer`` loaded from the checkpoint, so
the numbers describe exactly the bonus a training run will receive. On the dataset the
checkpoint was trained on, only its held-out episodes are scored; any other dataset is scored
whole (none of it was trained on), against the prior the checkpoint recorded from its training
frames. Besides the AUC: the prior's, the lift over it, per context, and the AUC with the images
shuffled within contexts (``found_rl.clip.lift``). Where the frames record their towns, every
number is also given per town, as scoring that town's frames alone would give it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from found_rl.clip.data import ClipFrames
from found_rl.clip.lift import MIN_CONTEXT_FRAMES, ImageEvidence, image_evidence, shuffle_within_groups
from found_rl.clip.quality import RewardQuality, prior_table, reward_quality, scored_bonuses
from found_rl.dataset.shards import MANIFEST_NAME
from found_rl.errors import UserError
from vlm_server.anchors import NUM_ACTIONS, anchor_captions
from vlm_server.clip_inputs import DEFAULT_CONTEXT, context_named
from vlm_server.clip_preprocess import normalise

SCORE_BATCH = 256
ANCHOR_GROUPS = len(anchor_captions()) // NUM_ACTIONS  # command x speed bin: 24 (METHOD §3)


def dataset_fingerprint(directory: str | Path) -> str:
    """sha256 of the dataset's manifest (it lists every shard and the collection settings)."""
    return hashlib.sha256((Path(directory) / MANIFEST_NAME).read_bytes()).hexdigest()


@dataclass(frozen=True)
class Evaluation:
    """A checkpoint's reward quality, the image-blind prior's for comparison, and what was scored.

    Attributes:
        quality: the served bonus's quality.
        prior: the image-blind prior's, scored alike (None without training frames or a recorded prior).
        scope: "held-out episodes (N of M)", "whole dataset", or the town of a per-town row.
        evidence: lift over the prior, per context, shuffle control (None without a prior).
        per_town: the same for each town's frames alone, by town name ({} when no town is recorded).
    """

    quality: RewardQuality
    prior: RewardQuality | None
    scope: str
    evidence: ImageEvidence | None = None
    per_town: dict[str, Evaluation] = field(default_factory=dict)


def scorer_probabilities(scorer, frames: ClipFrames, show_progress: bool = False) -> np.ndarray:
    """``[N, 30]`` the served scorer's probabilities over each frame's group anchors."""
    from tqdm import tqdm

    rows, bins = frames.command_rows, frames.speed_bins
    chunks = []
    for start in tqdm(range(0, len(frames), SCORE_BATCH), desc="score", unit="batch", disable=not show_progress):
        window = slice(start, start + SCORE_BATCH)
        chunks.append(scorer.group_probabilities(frames.inputs(window), rows[window], bins[window]))
    return np.concatenate(chunks)


def model_probabilities(
    model: torch.nn.Module,
    caption_tokens: torch.Tensor,
    frames: ClipFrames,
    mean: tuple[float, ...],
    std: tuple[float, ...],
    device: torch.device,
) -> np.ndarray:
    """``[N, 30]`` the same probabilities from a model being trained (validation during fine-tuning).

    ``caption_tokens`` are the tokenised 720 anchors, in ``anchor_captions()`` order.
    """
    was_training = model.training
    model.eval()
    with torch.inference_mode():
        text = F.normalize(model.encode_text(caption_tokens.to(device)).float(), dim=-1)
        anchors = text.reshape(-1, NUM_ACTIONS, text.shape[-1])  # [24 groups, 30, D]
        scale = model.logit_scale.exp().float()
        chunks = []
        for start in range(0, len(frames), SCORE_BATCH):
            stop = start + SCORE_BATCH
            pixels = normalise(torch.from_numpy(frames.inputs(slice(start, stop))).to(device), mean, std)
            features = F.normalize(model.encode_image(pixels).float(), dim=-1)
            groups = torch.from_numpy(frames.groups[start:stop]).to(device)
            logits = scale * torch.einsum("bd,bkd->bk", features, anchors[groups])
            chunks.append(torch.softmax(logits, dim=-1).cpu().numpy().astype(np.float64))
    model.train(was_training)
    return np.concatenate(chunks)


def held_out_scope(frames: ClipFrames, training: dict, data_dir: str | Path) -> tuple[np.ndarray, str]:
    """Which frames to score: the checkpoint's held-out episodes on its own data, else all."""
    is_same_data = training.get("data_sha256") == dataset_fingerprint(data_dir)
    if not is_same_data:
        return np.ones(len(frames), dtype=bool), "whole dataset (not the checkpoint's training data)"
    return held_out_episodes_scope(frames, training.get("held_out_episodes", []), data_dir)


def held_out_episodes_scope(
    frames: ClipFrames, held_out_episodes: Sequence[int], data_dir: str | Path
) -> tuple[np.ndarray, str]:
    """``(mask of the frames of these episodes, the scope's description)``; refused when none is here."""
    held_out = np.asarray(held_out_episodes, dtype=np.int64)
    mask = np.isin(frames.episodes, held_out)
    if not mask.any():
        raise UserError(f"--data {data_dir}: is the training data but none of its held-out episodes are here")
    return mask, f"held-out episodes ({len(held_out)} of {len(np.unique(frames.episodes))}, {int(mask.sum())} frames)"


@dataclass(frozen=True)
class RecordedPriors:
    """The priors a checkpoint recorded from its training frames (for data it was not trained on).

    Attributes:
        group: ``[24, 30]`` p(a | command, speed bin), the image-blind baseline.
        context: ``[contexts, 30]`` p(a | context) of its own context definition.
    """

    group: np.ndarray
    context: np.ndarray

    @classmethod
    def of(cls, training: dict) -> RecordedPriors | None:
        if "group_prior" not in training or "context_prior" not in training:
            return None
        return cls(np.asarray(training["group_prior"]), np.asarray(training["context_prior"]))


def model_distribution(
    objective: str, context_name: str, served: np.ndarray, frames: ClipFrames, context_table: np.ndarray
) -> np.ndarray:
    """``[N, 30]`` the model's p(a | image, context) from what a checkpoint of ``objective`` serves.

    A contrastive checkpoint serves it directly. A logit-adjusted one serves the residual
    ∝ p(a | image, context) / p(a | context), so the prior of the frame's context (of the
    checkpoint's ``context_name`` definition) multiplies back in.
    """
    if objective != "logit-adjusted":
        return served
    context = context_named(context_name, "context")
    joint = served * context_table[context.ids(frames.command_rows, frames.speed_bins)]
    return joint / joint.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class HeldOutScores:
    """What a scorer gives the scored frames, with their own images and with images shuffled.

    Each array is ``[N, 30]``, a distribution over the 30 anchors of the frame's (command, speed)
    group. The shuffle gives frame ``i`` the image of another scored frame of its context (and
    town), so command, speed and action stay and only the image–action pairing is broken.

    Attributes:
        frames: the N scored frames.
        served, shuffled_served: what the scorer serves (for a logit-adjusted checkpoint: the
            image's evidence beyond the prior), the input of the bonus.
        model, shuffled_model: the model's p(a | image, context) (``model_distribution``).
        prior: p(a | command, speed bin), the training frames' action frequencies.
        towns: ``[N]`` each frame's town name (None: no town recorded).
        The shuffled, model and prior arrays are None where no prior is known.
    """

    frames: ClipFrames
    served: np.ndarray
    shuffled_served: np.ndarray | None
    model: np.ndarray | None
    shuffled_model: np.ndarray | None
    prior: np.ndarray | None
    towns: np.ndarray | None


def score_held_out(
    scorer,
    frames: ClipFrames,
    scored: np.ndarray,
    recorded: RecordedPriors | None = None,
    shuffle_seed: int = 0,
    show_progress: bool = False,
    towns: Sequence[str] | None = None,
) -> HeldOutScores:
    """Score ``frames[scored]`` with a loaded scorer, with their images and with images shuffled.

    The priors are fitted on the other frames (the checkpoint's training episodes); when every
    frame is scored, the ``recorded`` ones stand in, and without either there is no prior, model
    distribution or shuffle. ``towns`` (each frame's town name, aligned with ``frames``) makes
    the shuffle stay within town and context. The same frames, seed and towns give every scorer
    the same shuffle, so scorers can be set side by side (``found_rl.clip.ladder``).
    """
    test = frames.subset(scored)
    served = scorer_probabilities(scorer, test, show_progress)
    town_of = None if towns is None else np.asarray(towns, dtype=object)[scored]
    train = frames.subset(~scored)
    context_name = getattr(scorer, "context", DEFAULT_CONTEXT)
    context = context_named(context_name, "context")
    if len(train):
        group_table = prior_table(train.groups, train.action_ids, ANCHOR_GROUPS)
        context_ids = context.ids(train.command_rows, train.speed_bins)
        context_table = prior_table(context_ids, train.action_ids, context.size)
    elif recorded is not None:
        group_table, context_table = recorded.group, recorded.context
    else:
        return HeldOutScores(test, served, None, None, None, None, town_of)
    shuffled = test.with_inputs_of(shuffle_within_groups(_town_groups(test.groups, town_of), shuffle_seed))
    shuffled_served = scorer_probabilities(scorer, shuffled, show_progress)
    objective = getattr(scorer, "objective", "contrastive")
    return HeldOutScores(
        frames=test,
        served=served,
        shuffled_served=shuffled_served,
        model=model_distribution(objective, context_name, served, test, context_table),
        shuffled_model=model_distribution(objective, context_name, shuffled_served, test, context_table),
        prior=group_table[test.groups],
        towns=town_of,
    )


def evaluate(
    scorer,
    frames: ClipFrames,
    scored: np.ndarray,
    scope: str,
    recorded: RecordedPriors | None = None,
    min_context_frames: int = MIN_CONTEXT_FRAMES,
    shuffle_seed: int = 0,
    show_progress: bool = False,
    towns: Sequence[str] | None = None,
) -> Evaluation:
    """Score ``frames[scored]`` with a loaded scorer, against the image-blind prior.

    The frames and priors are those of ``score_held_out``. The lift, per-context AUCs and the
    shuffle control score the model's p(a | image, context) (``model_distribution``), so a
    logit-adjusted checkpoint, which serves only the image's evidence, is measured on the same
    footing as a contrastive one. With ``towns``, a row per town of the scored frames is added.
    """
    scores = score_held_out(scorer, frames, scored, recorded, shuffle_seed, show_progress, towns)
    return measure(scores, scope, min_context_frames)


def measure(scores: HeldOutScores, scope: str, min_context_frames: int = MIN_CONTEXT_FRAMES) -> Evaluation:
    """The ``Evaluation`` of a scorer's held-out scores: overall, and per town where towns are known."""
    test = scores.frames
    if scores.prior is None or scores.model is None or scores.shuffled_model is None:

        def unmeasured(rows: np.ndarray, name: str) -> Evaluation:
            return Evaluation(_quality(scores.served, test, rows), None, name)

        return _per_town(unmeasured, len(test), scope, scores.towns)
    prior_probs, model_probs, shuffled_probs = scores.prior, scores.model, scores.shuffled_model

    def measured(rows: np.ndarray, name: str) -> Evaluation:
        actions = test.action_ids[rows]
        evidence = image_evidence(
            scored_bonuses(model_probs[rows], actions),
            scored_bonuses(prior_probs[rows], actions),
            scored_bonuses(shuffled_probs[rows], actions),
            test.groups[rows],
            min_context_frames,
        )
        return Evaluation(_quality(scores.served, test, rows), _quality(prior_probs, test, rows), name, evidence)

    return _per_town(measured, len(test), scope, scores.towns)


def _quality(probs: np.ndarray, test: ClipFrames, rows: np.ndarray) -> RewardQuality:
    return reward_quality(probs[rows], test.action_ids[rows], test.command_rows[rows])


def _town_groups(groups: np.ndarray, town_of: np.ndarray | None) -> np.ndarray:
    """Anchor groups made distinct per town (unchanged without towns, or in one town)."""
    if town_of is None:
        return groups
    _, town_ids = np.unique(town_of.astype(str), return_inverse=True)
    return town_ids.astype(np.int64) * ANCHOR_GROUPS + groups


def _per_town(
    measure: Callable[[np.ndarray, str], Evaluation], frames: int, scope: str, town_of: np.ndarray | None
) -> Evaluation:
    """``measure(rows, name)`` of all ``frames`` scored frames, with a ``per_town`` row per town, by name."""
    whole = measure(np.ones(frames, dtype=bool), scope)
    if town_of is None:
        return whole
    per_town = {str(town): measure(town_of == town, str(town)) for town in sorted(set(town_of.tolist()))}
    return replace(whole, per_town=per_town)


def caption_tokens(tokenizer) -> torch.Tensor:
    """``[720, context]`` tokens of the anchors in grid order."""
    return tokenizer(anchor_captions())

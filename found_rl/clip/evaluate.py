"""Reward quality of a fine-tuned checkpoint on held-out expert frames, scored by the served code.

The frames are scored by ``vlm_server``'s own ``OpenClipScorer`` loaded from the checkpoint, so
the numbers describe exactly the bonus a training run will receive. On the dataset the
checkpoint was trained on, only its held-out episodes are scored; any other dataset is scored
whole (none of it was trained on).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from found_rl.clip.data import ClipFrames
from found_rl.clip.quality import RewardQuality, prior_probabilities, reward_quality
from found_rl.dataset.shards import MANIFEST_NAME
from found_rl.errors import UserError
from vlm_server.anchors import NUM_ACTIONS, SPEED_PHRASES, anchor_captions
from vlm_server.clip_preprocess import normalise

SCORE_BATCH = 256


def dataset_fingerprint(directory: str | Path) -> str:
    """sha256 of the dataset's manifest (it lists every shard and the collection settings)."""
    return hashlib.sha256((Path(directory) / MANIFEST_NAME).read_bytes()).hexdigest()


@dataclass(frozen=True)
class Evaluation:
    """A checkpoint's reward quality, the image-blind prior's for comparison, and what was scored."""

    quality: RewardQuality
    prior: RewardQuality | None
    scope: str  # "held-out episodes (N of M)" or "whole dataset"


def scorer_probabilities(scorer, frames: ClipFrames, show_progress: bool = False) -> np.ndarray:
    """``[N, 30]`` the served scorer's probabilities over each frame's group anchors."""
    from tqdm import tqdm

    rows = frames.command_rows
    bins = frames.groups % len(SPEED_PHRASES)
    chunks = []
    for start in tqdm(range(0, len(frames), SCORE_BATCH), desc="score", unit="batch", disable=not show_progress):
        stop = start + SCORE_BATCH
        chunks.append(scorer.group_probabilities(frames.images[start:stop], rows[start:stop], bins[start:stop]))
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
            pixels = normalise(torch.from_numpy(frames.images[start:stop]).to(device), mean, std)
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
    held_out = np.asarray(training.get("held_out_episodes", []), dtype=np.int64)
    mask = np.isin(frames.episodes, held_out)
    if not mask.any():
        raise UserError(
            f"--data {data_dir}: is the checkpoint's training data but none of its held-out episodes are here"
        )
    return mask, f"held-out episodes ({len(held_out)} of {len(np.unique(frames.episodes))}, {int(mask.sum())} frames)"


def evaluate(scorer, frames: ClipFrames, scored: np.ndarray, scope: str, show_progress: bool = False) -> Evaluation:
    """Score ``frames[scored]`` with a loaded scorer; the prior is fitted on the other frames (if any)."""
    test = frames.subset(scored)
    probs = scorer_probabilities(scorer, test, show_progress)
    quality = reward_quality(probs, test.action_ids, test.command_rows)
    prior = None
    if (~scored).any():
        train = frames.subset(~scored)
        prior_probs = prior_probabilities(train.groups, train.action_ids, test.groups)
        prior = reward_quality(prior_probs, test.action_ids, test.command_rows)
    return Evaluation(quality, prior, scope)


def caption_tokens(tokenizer) -> torch.Tensor:
    """``[720, context]`` tokens of the anchors in grid order."""
    return tokenizer(anchor_captions())

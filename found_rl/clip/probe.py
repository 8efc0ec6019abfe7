"""The supervised action probe: a CLIP image tower and a classifier head over the 30 action classes.

Rung (a) of the diagnostic ladder (issue 32, ``found_rl.clip.ladder``): how much the image tells
about the expert's action beyond the context prior, with this data and this resolution, when
nothing but plain cross-entropy stands between the image and the label (no text tower, no
temperature, no anchors). The image tower is the CLIP model's own (``create_clip_model(...).visual``,
built, initialised and fed exactly as ``clip finetune`` does); a small head reads its features with
the frame's (command, speed bin) context, and its logits are added to the training frames'
log p(a | command, speed bin). The head's last layer starts at zero, so the probe starts as the
prior and moves only where the image pays (as a logit-adjusted CLIP model, whose residual is the
same quantity). Where the probe beats the prior on held-out episodes and the CLIP model does not,
the contrastive training loses the signal; where the probe does not either, the data or the image does.

A probe file is a plain ``torch.save`` dict (``PROBE_FORMAT``): the probe scores frames for the
ladder, it is never served.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from found_rl.atomic import replaced_atomically
from found_rl.clip.evaluate import ANCHOR_GROUPS
from found_rl.clip.schedule import DEFAULT_EPOCHS, RunLength
from found_rl.errors import UserError, as_user_error
from vlm_server.anchors import NUM_ACTIONS, SPEED_PHRASES
from vlm_server.clip_checkpoint import build_model, widen_image_stem
from vlm_server.clip_inputs import DEFAULT_IMAGE_INPUT, image_input_named
from vlm_server.clip_preprocess import normalise
from vlm_server.torch_files import load_torch_file

PROBE_FORMAT = "found-rl-action-probe/1"
SCORE_BATCH = 256


@dataclass(frozen=True)
class ProbeConfig:
    """Hyperparameters of one probe run."""

    model_name: str = "found-rl-vit-tiny"
    """the CLIP model whose image tower the probe uses (a found-rl small config or an open_clip name)"""
    image_size: int = 64
    """the tower's input side, px"""
    image_input: str = DEFAULT_IMAGE_INPUT
    """what the tower reads (vlm_server.clip_inputs.IMAGE_INPUTS)"""
    pretrained: str | None = None
    """the tower's initial weights: an open_clip tag or file, or a found-rl CLIP checkpoint (None: random)"""
    is_tower_frozen: bool = False
    """train the head only (with ``pretrained``: what those image features already hold)"""
    epochs: int | None = DEFAULT_EPOCHS
    """stop after this many epochs (None: ``max_minutes`` alone stops the run)"""
    max_minutes: float | None = None
    """stop after this much wall time; the stopping rule when ``epochs`` is None"""
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.05
    warmup_steps: int = 50
    grad_clip_norm: float = 1.0
    hidden: int = 128
    """width of the head's hidden layer"""
    context_dim: int = 16
    """width of the learnt context embedding the head reads beside the image features"""
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        image_input_named(self.image_input, "--image-input")
        RunLength(1, self.epochs, self.max_minutes)  # refuses a run that never stops
        if self.batch_size < 2:
            raise ValueError(f"--batch-size must be >= 2, got {self.batch_size}")


class ActionProbe(torch.nn.Module):
    """``logits = log p(a | group) + head([tower(image), embedding(group)])`` over the 30 actions.

    Args:
        tower: an open_clip image tower (``[B, 3 T, S, S]`` -> ``[B, feature_dim]``).
        feature_dim: the tower's output width.
        log_prior: ``[24, 30]`` log p(a | command, speed bin) of the training frames (kept fixed).
        hidden: width of the head's hidden layer.
        context_dim: width of the group embedding.
    """

    def __init__(
        self, tower: torch.nn.Module, feature_dim: int, log_prior: torch.Tensor, hidden: int, context_dim: int
    ) -> None:
        super().__init__()
        self.tower = tower
        self.context_embedding = torch.nn.Embedding(ANCHOR_GROUPS, context_dim)
        self.hidden = torch.nn.Linear(feature_dim + context_dim, hidden)
        self.out = torch.nn.Linear(hidden, NUM_ACTIONS)
        torch.nn.init.zeros_(self.out.weight)  # start as the prior
        torch.nn.init.zeros_(self.out.bias)
        self.register_buffer("log_prior", log_prior.float().clone())

    def forward(self, pixels: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
        """``[B, 30]`` logits of p(a | image, group) for normalised ``pixels`` and ``[B]`` int ``groups``."""
        features = self.tower(pixels).float()
        hidden = F.gelu(self.hidden(torch.cat([features, self.context_embedding(groups)], dim=-1)))
        return self.log_prior[groups] + self.out(hidden)


def build_probe(tower: torch.nn.Module, prior: np.ndarray, config: ProbeConfig) -> ActionProbe:
    """A probe on ``tower`` (its width read off ``output_dim``, as open_clip's towers record it).

    ``prior``: ``[24, 30]`` p(a | command, speed bin), Laplace-smoothed (``quality.prior_table``: no zeros).
    """
    prior = np.asarray(prior, dtype=np.float64)
    if prior.shape != (ANCHOR_GROUPS, NUM_ACTIONS) or not (prior > 0).all():
        raise ValueError(f"prior: expected [{ANCHOR_GROUPS}, {NUM_ACTIONS}] positive probabilities, got {prior.shape}")
    return ActionProbe(tower, int(tower.output_dim), torch.from_numpy(np.log(prior)), config.hidden, config.context_dim)


@dataclass
class TrainedProbe:
    """A probe with what scoring it and rebuilding it need.

    Attributes:
        probe: the model.
        config: how it was trained.
        model_cfg: the CLIP config its tower was built from.
        mean, std: the tower's pixel normalisation.
        prior: ``[24, 30]`` p(a | command, speed bin) of its training frames.
        record: where its data came from and how the run went (data, data_sha256,
            held_out_episodes, input_size, steps, epochs, stopped_by, elapsed_s).
    """

    probe: ActionProbe
    config: ProbeConfig
    model_cfg: dict[str, Any]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    prior: np.ndarray
    record: dict[str, Any]

    def save(self, path: str | Path) -> None:
        state = {name: tensor.detach().cpu() for name, tensor in self.probe.state_dict().items()}
        payload = {
            "format": PROBE_FORMAT,
            "config": asdict(self.config),
            "model_cfg": self.model_cfg,
            "mean": list(self.mean),
            "std": list(self.std),
            "prior": self.prior.tolist(),
            "record": self.record,
            "state_dict": state,
        }
        with replaced_atomically(Path(path)) as tmp:
            torch.save(payload, tmp)


def load_probe(path: str | Path, flag: str = "--probe") -> TrainedProbe:
    """The probe saved in ``path`` (on the CPU, in eval mode).

    Raises:
        FileNotFoundError: no such file.
        UserError: not a probe file, or weights that do not fit its config (``flag`` and file named).
    """
    with as_user_error():
        payload = load_torch_file(path, flag)
    if not isinstance(payload, dict) or payload.get("format") != PROBE_FORMAT:
        raise UserError(f"{flag} {path}: not a `found-rl clip probe --out` file (format {PROBE_FORMAT})")
    config = ProbeConfig(**payload["config"])
    model = widen_image_stem(build_model(payload["model_cfg"]), image_input_named(config.image_input, flag).frames)
    prior = np.asarray(payload["prior"], dtype=np.float64)
    probe = build_probe(model.visual, prior, config)
    try:
        probe.load_state_dict(payload["state_dict"])
    except RuntimeError as exc:
        raise UserError(f"{flag} {path}: weights do not fit its {config.model_name} config ({exc})") from None
    return TrainedProbe(
        probe.eval(), config, payload["model_cfg"], tuple(payload["mean"]), tuple(payload["std"]), prior,
        dict(payload["record"]),
    )


class ProbeScorer:
    """A trained probe behind the scorer interface ``found_rl.clip.evaluate`` scores.

    It serves p(a | image, context) itself, as a contrastive checkpoint does, so its model
    distribution is what it serves.
    """

    objective = "probe"
    context = "command-speed"

    def __init__(self, trained: TrainedProbe, device: str | torch.device = "cpu") -> None:
        self.device = torch.device(device)
        self.trained = trained
        self.probe = trained.probe.to(self.device).eval()

    def group_probabilities(
        self, images: np.ndarray, command_rows: np.ndarray, speed_bins: np.ndarray
    ) -> np.ndarray:
        """``[B, 30]`` p(a | image, group) for ``[B, S, S, 3]`` (or ``[B, T, S, S, 3]``) uint8 at the tower's side."""
        groups = np.asarray(command_rows, np.int64) * len(SPEED_PHRASES) + np.asarray(speed_bins, np.int64)
        return probe_probabilities(self.probe, images, groups, self.trained.mean, self.trained.std, self.device)


def probe_probabilities(
    probe: ActionProbe,
    images: np.ndarray,
    groups: np.ndarray,
    mean: tuple[float, ...],
    std: tuple[float, ...],
    device: torch.device,
) -> np.ndarray:
    """``[N, 30]`` softmax of the probe's logits, in batches, without gradient."""
    was_training = probe.training
    probe.eval()
    chunks = []
    with torch.inference_mode():
        for start in range(0, len(groups), SCORE_BATCH):
            pixels = normalise(torch.from_numpy(np.ascontiguousarray(images[start : start + SCORE_BATCH])).to(device),
                               mean, std)
            group = torch.from_numpy(np.asarray(groups[start : start + SCORE_BATCH])).to(device)
            chunks.append(torch.softmax(probe(pixels, group), dim=-1).cpu().numpy().astype(np.float64))
    probe.train(was_training)
    return np.concatenate(chunks) if chunks else np.zeros((0, NUM_ACTIONS))

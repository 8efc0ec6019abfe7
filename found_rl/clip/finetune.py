"""Contrastive fine-tuning of an open_clip model on expert BEV frames (METHOD §3).

open_clip's recipe: AdamW (no weight decay on gains, biases and the temperature), linear
warm-up then cosine decay, gradient-norm clipping, the temperature clamped at 100, bf16
autocast on a GPU. The objective (``found_rl.clip.loss``) is ``logit-adjusted`` (the model learns
the image's evidence beyond the training prior p(a | context), against the 30 anchors of each
frame's own context) or the earlier caption-aware ``contrastive`` loss; each step encodes only
the captions it needs. With ``logit-adjusted`` the text tower is frozen by default: the 720
anchors are fixed targets (``FinetuneConfig.train_text_tower``). Junction frames can be drawn
more often (``found_rl.clip.sampling``), and the image tower can read the BEV history
(``vlm_server.clip_inputs``). The run stops after its epochs or its time budget
(``found_rl.clip.schedule``: with ``max_minutes`` alone, epochs repeat until the time is used).
The held-out episodes are scored after every epoch, with the lift over the prior.
Checkpoints are written atomically every ``checkpoint_every_steps`` and at the end; a run
resumes from its own checkpoint at the same step, with the same batches. Each records the data,
its episode split and the training episodes' towns, for ``clip evaluate``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from found_rl.atomic import replaced_atomically
from found_rl.clip.data import ClipFrames, EpisodeSplit
from found_rl.clip.evaluate import ANCHOR_GROUPS, caption_tokens, model_distribution, model_probabilities
from found_rl.clip.loss import caption_aware_clip_loss, distinct_captions, logit_adjusted_loss
from found_rl.clip.model import ClipModel, create_clip_model
from found_rl.clip.quality import prior_table, reward_quality
from found_rl.clip.sampling import balanced_epoch_order, epoch_order, is_junction
from found_rl.clip.schedule import DEFAULT_EPOCHS, RunLength, learning_rate
from found_rl.clip.towns import frames_networks
from found_rl.errors import UserError, as_user_error
from vlm_server.anchors import NUM_ACTIONS
from vlm_server.clip_checkpoint import ClipCheckpoint, anchors_sha256, load_model, read_checkpoint, text_tokenizer
from vlm_server.clip_inputs import (
    DEFAULT_CONTEXT,
    DEFAULT_IMAGE_INPUT,
    OBJECTIVES,
    context_named,
    image_input_named,
)
from vlm_server.clip_preprocess import normalise

MAX_LOGIT_SCALE = math.log(100.0)
LEGACY_RUN_SETTINGS = {
    "objective": "contrastive",
    "context": DEFAULT_CONTEXT,
    "image_input": DEFAULT_IMAGE_INPUT,
    "train_text_tower": True,
}
"""what a run saved before these settings existed was trained with (for --resume)"""

# TensorBoard tags (renaming one is a breaking change; the x-axis is the optimiser step)
TAG_LOSS = "losses/clip_loss"
TAG_LEARNING_RATE = "charts/learning_rate"
TAG_LOGIT_SCALE = "charts/logit_scale"
TAG_IMAGES_PER_S = "perf/images_per_s"
TAG_EVAL_AUC = "eval/auc"
TAG_EVAL_TOP1 = "eval/top1"
TAG_EVAL_AUC_LIFT = "eval/auc_lift"
TAGS = (
    TAG_LOSS, TAG_LEARNING_RATE, TAG_LOGIT_SCALE, TAG_IMAGES_PER_S, TAG_EVAL_AUC, TAG_EVAL_TOP1, TAG_EVAL_AUC_LIFT
)


@dataclass(frozen=True)
class FinetuneConfig:
    """Hyperparameters of one fine-tuning run."""

    model_name: str
    """a found-rl small config or an open_clip architecture"""
    pretrained: str | None
    """open_clip tag, weights file or found-rl checkpoint; None trains from scratch"""
    image_size: int
    """the model's input side, px (BEVs are area-resized to it)"""
    epochs: int | None = DEFAULT_EPOCHS
    """stop after this many epochs (None: ``max_minutes`` alone stops the run, epochs repeat until then)"""
    batch_size: int = 128
    lr: float = 2e-3
    """peak learning rate (small models from scratch; use ~1e-5 for a pretrained ViT-B-16)"""
    weight_decay: float = 0.1
    warmup_steps: int = 100
    grad_clip_norm: float = 1.0
    seed: int = 0
    max_minutes: float | None = None
    """stop (and save) after this much wall time, whatever the epoch; the stopping rule when ``epochs`` is None"""
    checkpoint_every_steps: int = 500
    val_max_frames: int = 4096
    """held-out frames scored after each epoch (the full held-out set is `clip evaluate`'s job)"""
    log_every_steps: int = 20
    device: str = "cpu"
    objective: str = "logit-adjusted"
    """"logit-adjusted" (learn the image's evidence beyond p(a | context)) or "contrastive" """
    context: str = DEFAULT_CONTEXT
    """the prior's context definition (vlm_server.clip_inputs.CONTEXTS)"""
    image_input: str = DEFAULT_IMAGE_INPUT
    """what the image tower reads (vlm_server.clip_inputs.IMAGE_INPUTS)"""
    junction_share: float | None = None
    """draw junction frames to this share of each epoch (None: as collected)"""
    train_text_tower: bool = False
    """logit-adjusted: train the text tower too (off: the 720 anchors are encoded once and stay fixed targets).

    A trained text tower lowers this loss fastest by collapsing the 30 anchors of a group onto one
    vector (measured on expert data: cosine 1.0000 between anchors after 20 minutes); the evidence
    is then constant across actions, no gradient reaches either tower, and the lift is 0.000. The
    contrastive objective always trains the text tower, whatever this says.
    """
    text_bank_refresh_steps: int = 50
    """logit-adjusted with ``train_text_tower``: re-encode all 720 anchors (no gradient) every this many
    steps (see _anchor_features); a frozen text tower's anchors never change and are encoded once"""

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"--objective {self.objective!r}: not one of {list(OBJECTIVES)}")
        context_named(self.context, "--context")
        image_input_named(self.image_input, "--image-input")
        if self.junction_share is not None and not 0.0 < self.junction_share < 1.0:
            raise ValueError(f"--junction-share must be in (0, 1), got {self.junction_share}")
        if self.text_bank_refresh_steps < 1:
            raise ValueError(f"text_bank_refresh_steps must be >= 1, got {self.text_bank_refresh_steps}")
        RunLength(1, self.epochs, self.max_minutes)  # refuses a run that never stops

    @property
    def trains_text_tower(self) -> bool:
        """Whether the text tower gets gradient: always for contrastive, on request for logit-adjusted."""
        return self.objective != "logit-adjusted" or self.train_text_tower


@dataclass(frozen=True)
class DataInfo:
    """Where the frames came from and how they were split (recorded for evaluate and resume)."""

    path: str
    sha256: str
    input_size: int
    split: EpisodeSplit
    val_fraction: float


def text_tower_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The text tower's parameters: everything but the image tower (``visual.``) and the temperature.

    open_clip's ``CLIP`` keeps the text modules at the top level (``transformer``, ``token_embedding``,
    ``ln_final``, ...) and ``CustomTextCLIP`` under ``text.``; the image tower is ``visual`` in both.
    """
    shared = ("logit_scale", "logit_bias")
    return [p for name, p in model.named_parameters() if not name.startswith("visual.") and name not in shared]


def freeze_text_tower(model: torch.nn.Module) -> None:
    """No gradient for the text tower, so the optimiser (``make_optimizer``) never sees it: neither
    the loss nor weight decay can move the anchors."""
    for parameter in text_tower_parameters(model):
        parameter.requires_grad_(False)


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW with open_clip's exclusions: no decay on 1-d parameters (gains, biases) or the temperature."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        is_excluded = parameter.ndim < 2 or "logit_scale" in name or name.endswith(".bias")
        (no_decay if is_excluded else decay).append(parameter)
    return torch.optim.AdamW(
        [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}],
        lr=lr,
        betas=(0.9, 0.98),
        eps=1e-6,
    )


class Finetuner:
    """Trains one model on ``train`` frames and validates on ``held_out`` frames.

    ``clock`` (seconds, monotonic) times the run against ``max_minutes``; tests pass a fake one.
    """

    def __init__(
        self,
        config: FinetuneConfig,
        train: ClipFrames,
        held_out: ClipFrames,
        data: DataInfo,
        out: Path,
        resume: bool = False,
        logdir: Path | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if len(train) < config.batch_size:
            raise UserError(
                f"--batch-size {config.batch_size}: larger than the {len(train)} training frames"
            )
        self.config, self.train_frames, self.held_out, self.data, self.out = config, train, held_out, data, out
        self.device = torch.device(config.device)
        torch.manual_seed(config.seed)
        self.clip: ClipModel = create_clip_model(
            config.model_name, config.pretrained, config.image_size, config.image_input
        )
        self.model = self.clip.model.to(self.device)
        if not config.trains_text_tower:
            freeze_text_tower(self.model)
        self.context = context_named(config.context, "--context")
        self.train_contexts = self.context.ids(train.command_rows, train.speed_bins)
        self.context_prior = prior_table(self.train_contexts, train.action_ids, self.context.size)
        context_prior = self.context_prior
        self.log_prior = torch.from_numpy(np.log(context_prior)).float().to(self.device)  # [contexts, 30]
        self.group_prior = prior_table(train.groups, train.action_ids, ANCHOR_GROUPS)  # [24, 30], validation
        self.junction = is_junction(train.command_rows)
        # {network hash: town} of the training frames: `clip evaluate --split other-towns` checks a
        # dataset against it even after the training data is gone
        self.training_towns = frames_networks(train)
        self.text_bank: torch.Tensor | None = None  # [720, D] anchor features, see _anchor_features
        if config.junction_share is not None:
            balanced_epoch_order(self.junction, config.junction_share, config.seed, 0)  # refuse bad data now
        self.tokens = caption_tokens(text_tokenizer(self.clip.model_cfg)).to(self.device)
        self.optimizer = make_optimizer(self.model, config.lr, config.weight_decay)
        self.steps_per_epoch = len(train) // config.batch_size
        self.length = RunLength(self.steps_per_epoch, config.epochs, config.max_minutes)
        self.clock = clock
        self.step = 0
        self.elapsed_s = 0.0
        """wall time of the run so far, earlier sessions of a resumed run included"""
        self.history: list[dict[str, float]] = []
        if resume:
            self._resume()
        self.logdir = logdir

    def _resume(self) -> None:
        with as_user_error():  # --out holds no CLIP checkpoint to resume
            checkpoint = read_checkpoint(self.out)
        training = checkpoint.training
        mine = asdict(self.config)
        theirs = {**LEGACY_RUN_SETTINGS, **training.get("config", {})}
        for key in (
            "model_name", "image_size", "batch_size", "seed", "epochs", "objective", "context", "image_input",
            "junction_share",
        ):
            if theirs.get(key) != mine[key]:
                raise UserError(
                    f"--resume: {self.out} was trained with {key}={theirs.get(key)!r}, this run has {mine[key]!r}"
                )
        self._check_text_tower_setting(theirs)
        if training.get("data_sha256") != self.data.sha256:
            raise UserError(f"--resume: {self.out} was trained on other data than --data {self.data.path}")
        with as_user_error():
            self.model.load_state_dict(load_model(checkpoint, self.out).state_dict())
        self.optimizer.load_state_dict(training["optimizer"])
        self.step = int(training["step"])
        self.elapsed_s = float(training.get("elapsed_s", 0.0))
        self.history = list(training.get("history", []))
        if training.get("text_bank") is not None:
            self.text_bank = training["text_bank"].to(self.device)

    def _check_text_tower_setting(self, theirs: dict[str, Any]) -> None:
        """Refuse to resume with the text tower trained in one session and frozen in another.

        Only logit-adjusted runs are compared (the objective already matches): contrastive always
        trains it, whatever its ``train_text_tower`` says.
        """
        mine = self.config.train_text_tower
        if self.config.objective != "logit-adjusted" or theirs.get("train_text_tower") == mine:
            return
        fix = "drop --train-text-tower" if mine else "pass --train-text-tower"
        raise UserError(
            f"--resume: {self.out} was trained with train_text_tower={theirs.get('train_text_tower')!r}, "
            f"this run has {mine!r} ({fix} to continue it)"
        )

    @property
    def total_steps(self) -> int | None:
        """Steps of the whole run when its epochs decide it (None under a time budget alone)."""
        return self.length.total_steps

    def run(self, show_progress: bool = True) -> dict[str, Any]:
        """Train until the run's length is used (``found_rl.clip.schedule``); returns the last
        validation, the flag that stopped the run (``stopped_by``) and timing."""
        from torch.utils.tensorboard import SummaryWriter
        from tqdm import tqdm

        config = self.config
        writer = SummaryWriter(str(self.logdir)) if self.logdir is not None else None
        started = self.clock()
        elapsed_before = self.elapsed_s
        last_log = (started, self.step)
        stopped_by = self.length.stop_reason(self.step, self.elapsed_s)
        validation: dict[str, float] = {}
        bar = tqdm(total=self.total_steps, initial=self.step, unit="step", desc="finetune", disable=not show_progress)
        try:
            while stopped_by is None:
                epoch, offset = divmod(self.step, self.steps_per_epoch)
                order = self._epoch_order(epoch)
                start = offset * config.batch_size
                batch = np.sort(order[start : start + config.batch_size])
                progress = self.length.progress(self.step, self.elapsed_s, config.warmup_steps)
                loss, logit_scale = self._train_step(batch, learning_rate(
                    self.step, progress, config.lr, config.warmup_steps
                ))
                self.step += 1
                bar.update(1)
                now = self.clock()
                self.elapsed_s = elapsed_before + now - started
                if writer is not None and self.step % config.log_every_steps == 0:
                    images_per_s = (self.step - last_log[1]) * config.batch_size / max(1e-9, now - last_log[0])
                    last_log = (now, self.step)
                    writer.add_scalar(TAG_LOSS, loss, self.step)
                    writer.add_scalar(TAG_LEARNING_RATE, self.optimizer.param_groups[0]["lr"], self.step)
                    writer.add_scalar(TAG_LOGIT_SCALE, logit_scale, self.step)
                    writer.add_scalar(TAG_IMAGES_PER_S, images_per_s, self.step)
                bar.set_postfix(loss=f"{loss:.3f}", **{k: f"{v:.3f}" for k, v in validation.items()})
                is_epoch_end = self.step % self.steps_per_epoch == 0
                stopped_by = self.length.stop_reason(self.step, self.elapsed_s)
                if is_epoch_end or stopped_by is not None:
                    validation = self.validate()
                    self.history.append({"step": self.step, "loss": loss, **validation})
                    if writer is not None:
                        writer.add_scalar(TAG_EVAL_AUC, validation["auc"], self.step)
                        writer.add_scalar(TAG_EVAL_TOP1, validation["top1"], self.step)
                        writer.add_scalar(TAG_EVAL_AUC_LIFT, validation["auc_lift"], self.step)
                if self.step % config.checkpoint_every_steps == 0 or is_epoch_end:
                    self.save()
        finally:
            bar.close()
            if writer is not None:
                writer.close()
        self.elapsed_s = elapsed_before + self.clock() - started
        self.save()
        return {
            "steps": self.step,
            "epochs": self.step / self.steps_per_epoch,
            "stopped_by": stopped_by,
            "wall_s": self.elapsed_s - elapsed_before,
            "elapsed_s": self.elapsed_s,
            "validation": validation,
        }

    def _epoch_order(self, epoch: int) -> np.ndarray:
        share = self.config.junction_share
        if share is None:
            return epoch_order(len(self.train_frames), self.config.seed, epoch)
        return balanced_epoch_order(self.junction, share, self.config.seed, epoch)

    def _train_step(self, batch: np.ndarray, lr: float) -> tuple[float, float]:
        config = self.config
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        images = torch.from_numpy(self.train_frames.inputs(batch)).to(self.device)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.device.type == "cuda"):
            pixels = normalise(images, self.clip.mean, self.clip.std)
            image_features = F.normalize(self.model.encode_image(pixels).float(), dim=-1)
            logit_scale = self.model.logit_scale.exp()
            if config.objective == "logit-adjusted":
                loss = self._logit_adjusted_loss(batch, image_features, logit_scale)
            else:
                loss = self._contrastive_loss(batch, image_features, logit_scale)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), config.grad_clip_norm)
        self.optimizer.step()
        with torch.no_grad():
            self.model.logit_scale.clamp_(0, MAX_LOGIT_SCALE)
        return float(loss.detach()), float(logit_scale.detach())

    def _contrastive_loss(
        self, batch: np.ndarray, image_features: torch.Tensor, logit_scale: torch.Tensor
    ) -> torch.Tensor:
        caption_ids = torch.from_numpy(self.train_frames.caption_ids[batch]).to(self.device)
        distinct, rows = distinct_captions(caption_ids)
        text_features = F.normalize(self.model.encode_text(self.tokens[distinct]).float(), dim=-1)
        return caption_aware_clip_loss(image_features, text_features, rows, logit_scale)

    def _logit_adjusted_loss(
        self, batch: np.ndarray, image_features: torch.Tensor, logit_scale: torch.Tensor
    ) -> torch.Tensor:
        """30-way logit-adjusted cross-entropy against the anchors of each frame's own group."""
        frames = self.train_frames
        anchors = self._anchor_features(batch)
        groups = torch.from_numpy(frames.groups[batch]).to(self.device)
        group_anchors = anchors.view(ANCHOR_GROUPS, NUM_ACTIONS, -1)[groups]  # [B, 30, D]
        residual = logit_scale * torch.einsum("bd,bkd->bk", image_features, group_anchors)
        log_prior = self.log_prior[torch.from_numpy(self.train_contexts[batch]).to(self.device)]
        actions = torch.from_numpy(frames.action_ids[batch]).to(self.device)
        return logit_adjusted_loss(residual, log_prior, actions)

    def _anchor_features(self, batch: np.ndarray) -> torch.Tensor:
        """``[720, D]`` the anchors this step scores the images against.

        A frozen text tower's are encoded once (``_fixed_anchors``). A trained one's are the batch's
        own captions, encoded with gradient, and for the other actions of each group features from
        a bank of all 720 (a memory bank, as MoCo's): encoding every anchor of every group in the
        batch with gradient costs ~5x the image tower on a CPU. The bank takes each step's fresh
        features and is re-encoded whole every ``text_bank_refresh_steps``.
        """
        if not self.config.trains_text_tower:
            if self.text_bank is None:
                self.text_bank = self._fixed_anchors()
            return self.text_bank
        if self.text_bank is None or self.step % self.config.text_bank_refresh_steps == 0:
            self.text_bank = self._encode_all_anchors()
        caption_ids = torch.from_numpy(self.train_frames.caption_ids[batch]).to(self.device)
        distinct, _ = distinct_captions(caption_ids)
        fresh = F.normalize(self.model.encode_text(self.tokens[distinct]).float(), dim=-1)
        anchors = self.text_bank.index_put((distinct,), fresh)  # gradient through the fresh rows
        self.text_bank = anchors.detach()
        return anchors

    def _fixed_anchors(self) -> torch.Tensor:
        """The frozen text tower's ``[720, D]`` anchors, encoded as validation and the server encode
        them (eval mode, float32, no autocast), so training targets exactly what is served."""
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.autocast(self.device.type, enabled=False):
                return self._encode_all_anchors()
        finally:
            self.model.train(was_training)

    def _encode_all_anchors(self) -> torch.Tensor:
        """``[720, D]`` L2-normalised features of every anchor, without gradient."""
        with torch.no_grad():
            chunks = [self.model.encode_text(self.tokens[i : i + 240]).float() for i in range(0, len(self.tokens), 240)]
        return F.normalize(torch.cat(chunks), dim=-1)

    def validate(self) -> dict[str, float]:
        """On (up to ``val_max_frames``) held-out frames: the served bonus's AUC and top-1, and the
        model's p(a | image, context) AUC with its lift over the prior, as ``clip evaluate`` has them.

        A logit-adjusted model serves only the image's evidence (chance 0.5); its lift is measured
        on the evidence times the prior (``model_distribution``), not on the served AUC.
        """
        frames = self.held_out
        if len(frames) > self.config.val_max_frames:
            rng = np.random.default_rng(self.config.seed)
            keep = rng.choice(len(frames), self.config.val_max_frames, replace=False)
            frames = frames.subset(np.sort(keep))
        served = model_probabilities(self.model, self.tokens, frames, self.clip.mean, self.clip.std, self.device)
        model = model_distribution(self.config.objective, self.config.context, served, frames, self.context_prior)
        quality = reward_quality(served, frames.action_ids, frames.command_rows)
        model_auc = reward_quality(model, frames.action_ids, frames.command_rows).auc
        prior = reward_quality(self.group_prior[frames.groups], frames.action_ids, frames.command_rows)
        return {"auc": quality.auc, "top1": quality.top1, "model_auc": model_auc, "auc_lift": model_auc - prior.auc}

    def checkpoint(self) -> ClipCheckpoint:
        state_dict = {name: tensor.detach().cpu() for name, tensor in self.model.state_dict().items()}
        return ClipCheckpoint(
            model_name=self.clip.model_name,
            model_cfg=self.clip.model_cfg,
            image_size=self.clip.image_size,
            input_size=self.data.input_size,
            mean=self.clip.mean,
            std=self.clip.std,
            anchors_sha256=anchors_sha256(),
            context=self.config.context,
            image_input=self.config.image_input,
            objective=self.config.objective,
            state_dict=state_dict,
            training={
                "config": asdict(self.config),
                "step": self.step,
                "elapsed_s": self.elapsed_s,
                "steps_per_epoch": self.steps_per_epoch,
                "optimizer": self.optimizer.state_dict(),
                "data": self.data.path,
                "data_sha256": self.data.sha256,
                "held_out_episodes": list(self.data.split.held_out),
                "training_towns": self.training_towns,
                "val_fraction": self.data.val_fraction,
                "history": self.history,
                "group_prior": self.group_prior.tolist(),
                "context_prior": self.context_prior.tolist(),
                "text_bank": None if self.text_bank is None else self.text_bank.detach().cpu(),
            },
        )

    def save(self) -> None:
        with replaced_atomically(self.out) as tmp:
            torch.save(self.checkpoint().to_dict(), tmp)

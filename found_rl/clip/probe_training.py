"""Training the supervised action probe (``found_rl.clip.probe``) on expert frames within a budget.

The recipe is ``clip finetune``'s where the two share a part, so the rungs of the ladder differ
in their objective and not in their training: the same image tower built the same way, the same
epoch order (``found_rl.clip.sampling``), AdamW with open_clip's exclusions, warm-up and cosine
decay, gradient-norm clipping, and the same stopping rules (``found_rl.clip.schedule``: with
``max_minutes`` alone, epochs repeat until the time is used).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from found_rl.clip.data import ClipFrames
from found_rl.clip.evaluate import ANCHOR_GROUPS
from found_rl.clip.finetune import make_optimizer
from found_rl.clip.model import create_clip_model
from found_rl.clip.probe import ProbeConfig, TrainedProbe, build_probe
from found_rl.clip.quality import prior_table
from found_rl.clip.sampling import epoch_order
from found_rl.clip.schedule import RunLength, learning_rate
from found_rl.errors import UserError
from vlm_server.clip_preprocess import normalise


@dataclass(frozen=True)
class ProbeRun:
    """How a probe run went.

    Attributes:
        steps: optimiser steps taken.
        epochs: passes over the training frames (fractional when a time budget stopped the run).
        stopped_by: the flag that ended it (``--epochs 6`` or ``--max-minutes 20``).
        wall_s: wall time of the training.
        loss: cross-entropy of the last step.
    """

    steps: int
    epochs: float
    stopped_by: str
    wall_s: float
    loss: float


def train_probe(
    config: ProbeConfig,
    train: ClipFrames,
    record: dict,
    clock: Callable[[], float] = time.perf_counter,
    show_progress: bool = False,
) -> tuple[TrainedProbe, ProbeRun]:
    """Train a probe on ``train`` until its run length is used.

    Args:
        config: the run's hyperparameters.
        train: the training frames, at ``config.image_size`` and ``config.image_input``.
        record: where the frames came from (kept in the probe file; the run's outcome is added).
        clock: seconds, monotonic; tests pass a fake one.
        show_progress: draw a progress bar.

    Raises:
        UserError: fewer training frames than ``config.batch_size``, or a bad model (named).
    """
    from tqdm import tqdm

    if len(train) < config.batch_size:
        raise UserError(f"--batch-size {config.batch_size}: larger than the {len(train)} training frames")
    device = torch.device(config.device)
    torch.manual_seed(config.seed)
    clip = create_clip_model(config.model_name, config.pretrained, config.image_size, config.image_input)
    prior = prior_table(train.groups, train.action_ids, ANCHOR_GROUPS)
    probe = build_probe(clip.model.visual, prior, config).to(device)
    if config.is_tower_frozen:
        probe.tower.requires_grad_(False)
    optimizer = make_optimizer(probe, config.lr, config.weight_decay)
    length = RunLength(len(train) // config.batch_size, config.epochs, config.max_minutes)
    groups, actions = torch.from_numpy(train.groups), torch.from_numpy(train.action_ids)
    started, step, elapsed, loss_value = clock(), 0, 0.0, float("nan")
    stopped_by = length.stop_reason(step, elapsed)
    with tqdm(total=length.total_steps, unit="step", desc="probe", disable=not show_progress) as bar:
        while stopped_by is None:
            probe.train()
            if config.is_tower_frozen:
                probe.tower.eval()  # a frozen ResNet tower keeps its batch-norm statistics
            epoch, offset = divmod(step, length.steps_per_epoch)
            start = offset * config.batch_size
            batch = np.sort(epoch_order(len(train), config.seed, epoch)[start : start + config.batch_size])
            lr = learning_rate(step, length.progress(step, elapsed, config.warmup_steps), config.lr,
                               config.warmup_steps)
            for group in optimizer.param_groups:
                group["lr"] = lr
            pixels = normalise(torch.from_numpy(train.inputs(batch)).to(device), clip.mean, clip.std)
            index = torch.from_numpy(batch)
            logits = probe(pixels, groups[index].to(device))
            loss = F.cross_entropy(logits, actions[index].to(device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(probe.parameters(), config.grad_clip_norm)
            optimizer.step()
            step += 1
            loss_value = float(loss.detach())
            bar.update(1)
            bar.set_postfix(loss=f"{loss_value:.3f}")
            elapsed = clock() - started
            stopped_by = length.stop_reason(step, elapsed)
    run = ProbeRun(step, step / length.steps_per_epoch, stopped_by, elapsed, loss_value)
    record = {**record, "steps": run.steps, "epochs": run.epochs, "stopped_by": run.stopped_by, "wall_s": run.wall_s}
    trained = TrainedProbe(probe.eval(), config, clip.model_cfg, clip.mean, clip.std, prior, record)
    return trained, run

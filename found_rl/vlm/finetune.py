"""Supervised fine-tuning of a VLM advisor on expert chat samples (behaviour cloning, loss on the answer).

Run folder (``--out``)::

    config.json         resolved settings (what --resume must match)
    checkpoint.pt       latest training state: trainable weights, optimiser, schedule, RNG, step
    tensorboard/        losses/answer_loss, losses/eval_answer_loss, charts/learning_rate, perf/*
                        (with --aux-action-weight also losses/aux_action* and losses/eval_aux_action*)
    model/              the servable model: LoRA merged into the weights (or the full model),
                        its processor, and found_rl_advisor.json (the BEV size it was trained on)
    summary.json        steps, why it stopped, training time, final losses, tokens/s and
                        samples/s, the episode split

With ``max_minutes`` the run stops at that training time (checkpoint, export, summary as at
the last step) and its learning-rate schedule runs on whichever of the steps or the time is
further along, so a time-limited run still ends its cosine decay at the limit.

The batch order is a pure function of the seed and the step (a fresh seeded permutation per
epoch), so a resumed run sees exactly the batches an uninterrupted one would.

With ``aux_action_weight`` W > 0 the loss is answer loss + W x the auxiliary action loss of
``found_rl.vlm.aux_action`` on the image tokens; its head lives in the checkpoint, not in
``model/``. During the first ``vision_warmup_steps`` steps only the vision tower (and the
projector and head) trains: the step runs the image features alone, not the decoder, so the
language weights get no gradient and the optimiser leaves them as they are (weights, Adam
moments and step count: a zero-weighted answer loss would instead let weight decay shrink them
and age their Adam statistics on zero gradients). They then get their own linear learning-rate
warm-up, as long as the schedule's, starting at the step they join.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from found_rl.atomic import replaced_atomically
from found_rl.dataset.town_overlap import networks_of
from found_rl.devices import resolve_device
from found_rl.errors import UserError, as_user_error
from found_rl.vlm.aux_action import ActionHead, ImageTokenTap, action_loss, action_targets, image_projector
from found_rl.vlm.batches import count_tokens, encode_batch
from found_rl.vlm.config import FinetuneConfig, config_json, resolve_precision, resume_changes
from found_rl.vlm.examples import load_datasets, split_episodes
from found_rl.vlm.lora import add_lora, merged
from found_rl.vlm.scratch import untrained_card

CHECKPOINT_FORMAT = "found-rl-vlm-finetune"
TAGS = (
    "losses/answer_loss",
    "losses/eval_answer_loss",
    "charts/learning_rate",
    "perf/tokens_per_s",
    "perf/samples_per_s",
)
"""TensorBoard tags; the x-axis is the optimiser step."""
AUX_TAGS = (
    "losses/aux_action",
    "losses/aux_action_accuracy",
    "losses/eval_aux_action",
    "losses/eval_aux_action_accuracy",
)
"""The tags a run with ``aux_action_weight > 0`` adds (a step of the vision warm-up logs no answer loss)."""
VISION_MARKERS = ("vision", "visual")
"""A weight whose qualified name holds one of these belongs to the vision tower (``--freeze-vision``)."""


def is_vision_tower_weight(name: str) -> bool:
    return any(marker in name for marker in VISION_MARKERS)


def batch_indices(micro_batch: int, batch_size: int, num_examples: int, seed: int) -> list[int]:
    """Example indices of global micro-batch ``micro_batch``: epoch ``e`` is a permutation seeded by ``(seed, e)``."""
    positions = range(micro_batch * batch_size, (micro_batch + 1) * batch_size)
    permutations: dict[int, np.ndarray] = {}
    indices = []
    for position in positions:
        epoch, offset = divmod(position, num_examples)
        if epoch not in permutations:
            permutations[epoch] = np.random.default_rng([seed, epoch]).permutation(num_examples)
        indices.append(int(permutations[epoch][offset]))
    return indices


class Finetuner:
    """One fine-tuning run: ``run()`` trains to ``config.steps`` (resuming if asked) and exports the model."""

    def __init__(self, config: FinetuneConfig, resume: bool = False, show_progress: bool = True) -> None:
        self.config = config
        self.out = Path(config.out)
        self.show_progress = show_progress
        self._check_out(resume)
        examples = load_datasets(config.data_folders)
        train_ids, held_ids = split_episodes((e.episode for e in examples), config.eval_fraction, config.split_seed)
        self.train = [e for e in examples if e.episode in train_ids]
        self.held_out = [e for e in examples if e.episode in held_ids]
        self.split = {"train_episodes": sorted(train_ids), "eval_episodes": sorted(held_ids)}
        self.image_hw = tuple(int(v) for v in self.train[0].image().shape[:2])
        per_step = config.batch_size * config.grad_accum
        self.total_steps = config.steps or max(1, math.ceil(config.epochs * len(self.train) / per_step))
        if config.vision_warmup_steps >= self.total_steps:
            raise UserError(
                f"--vision-warmup-steps {config.vision_warmup_steps}: the run has {self.total_steps} steps, so the "
                "language model would never train; give fewer warm-up steps"
            )
        self.device = resolve_device(config.device)
        self.autocast_dtype = resolve_precision(config.precision, self.device)
        self.step = 0
        self.train_seconds = 0.0  # training time of the run before this session's loop
        self._loop_started: float | None = None
        self._load_model()
        self.metrics: dict[str, float] = {}
        if resume and (self.out / "checkpoint.pt").is_file():
            self._restore(torch.load(self.out / "checkpoint.pt", map_location="cpu", weights_only=True))

    # --- set-up ------------------------------------------------------------------------------

    def _check_out(self, resume: bool) -> None:
        config_path = self.out / "config.json"
        if resume:
            if not config_path.is_file():
                raise UserError(f"--resume: {self.out} holds no fine-tuning run (no config.json); drop --resume")
            previous = json.loads(config_path.read_text())
            current = config_json(self.config)
            changed = resume_changes(previous, current)
            if changed:
                raise UserError(
                    f"--resume: {self.out} was trained with other settings ({', '.join(changed)}: "
                    f"{[previous.get(k) for k in changed]} vs now {[current.get(k) for k in changed]})"
                )
        elif self.out.exists() and any(self.out.iterdir()):
            raise UserError(
                f"--out {self.out}: folder is not empty; pass --resume to continue that run, or a new folder"
            )

    def _load_model(self) -> None:
        from transformers import AutoModelForImageTextToText, AutoProcessor

        from vlm_server.answers import build_prompt
        from vlm_server.backends.hf_checks import check_chat_template, check_image_size, check_image_text_to_text
        from vlm_server.backends.hf_vlm import chat_prompt_text

        config = self.config
        with as_user_error():  # --model is no chat model that takes images
            check_image_text_to_text(config.model, config.trust_remote_code)
        if config.method == "lora" and untrained_card(config.model) is not None:
            raise UserError(
                f"--lora: model {config.model} was initialised from scratch by `found-rl vlm init`, so its "
                "weights hold nothing for adapters to build on; train every weight with --full"
            )
        self.processor = AutoProcessor.from_pretrained(config.model, trust_remote_code=config.trust_remote_code)
        with as_user_error():
            check_chat_template(self.processor, config.model)
        # LoRA on a GPU: frozen base weights in the autocast dtype (half the memory); adapters
        # and full fine-tuning keep fp32 master weights.
        load_dtype = self.autocast_dtype if (config.method == "lora" and self.autocast_dtype) else torch.float32
        model = AutoModelForImageTextToText.from_pretrained(
            config.model, dtype=load_dtype, trust_remote_code=config.trust_remote_code
        ).to(self.device)
        prompt = chat_prompt_text(self.processor, build_prompt(4, 0.0))
        with as_user_error():
            check_image_size(self.processor, model, self.image_hw, prompt, config.model)
        torch.manual_seed(config.seed)  # adapter initialisation and dropout
        if config.method == "lora":
            model = add_lora(model, config.lora, config.model)
        elif config.freeze_vision:
            for name, parameter in model.named_parameters():
                if is_vision_tower_weight(name):
                    parameter.requires_grad_(False)
        if config.gradient_checkpointing:
            model.gradient_checkpointing_enable()
            if hasattr(model, "enable_input_require_grads"):
                model.enable_input_require_grads()
        self.model = model
        self.trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
        self.aux_head: ActionHead | None = None
        self.image_tap: ImageTokenTap | None = None
        if config.aux_action_weight > 0:  # seeded above; with W = 0 nothing is drawn, so runs train as before
            projector_name, projector = image_projector(model, config.model)
            self.aux_head = ActionHead(model.config.get_text_config().hidden_size).to(self.device)
            self.image_tap = ImageTokenTap(projector)
        warmup_steps = int(config.warmup_fraction * self.total_steps)
        schedule = _warmup_cosine(warmup_steps, self.total_steps)

        def factor(step: int) -> float:
            return schedule(self.schedule_position(step))

        if config.vision_warmup_steps:
            vision_side = {n: p for n, p in self.trainable.items()
                           if is_vision_tower_weight(n) or n.startswith(projector_name + ".")}
            language = [p for n, p in self.trainable.items() if n not in vision_side]
            groups = [{"params": [*vision_side.values(), *self.aux_head.parameters()]}, {"params": language}]
            join, ramp = config.vision_warmup_steps, max(1, warmup_steps)

            def language_factor(step: int) -> float:  # 0 while the decoder waits, then its own warm-up
                return 0.0 if step < join else factor(step) * min(1.0, (step - join + 1) / ramp)

            factors = [factor, language_factor]
        else:
            head = [] if self.aux_head is None else list(self.aux_head.parameters())
            groups, factors = [{"params": [*self.trainable.values(), *head]}], [factor]
        self.optimizer = torch.optim.AdamW(groups, lr=config.learning_rate, weight_decay=config.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, factors)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.autocast_dtype == torch.float16)

    def _restore(self, state: dict[str, Any]) -> None:
        if state.get("format") != CHECKPOINT_FORMAT:
            raise UserError(f"{self.out / 'checkpoint.pt'}: not a found-rl VLM fine-tuning checkpoint")
        if set(state["trainable"]) != set(self.trainable):
            raise UserError(f"{self.out / 'checkpoint.pt'}: its trainable weights do not match this model")
        with torch.no_grad():
            for name, value in state["trainable"].items():
                self.trainable[name].copy_(value)
        if self.aux_head is not None:
            if "aux_head" not in state:
                raise UserError(f"{self.out / 'checkpoint.pt'}: holds no auxiliary action head to resume")
            self.aux_head.load_state_dict(state["aux_head"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        torch.set_rng_state(state["torch_rng"])
        self.step = int(state["step"])
        self.train_seconds = float(state.get("train_seconds", 0.0))
        self.metrics = dict(state.get("metrics", {}))

    # --- time ------------------------------------------------------------------------------

    def elapsed_s(self) -> float:
        """The run's training time so far: earlier sessions (from the checkpoint) plus this loop's wall time."""
        running = 0.0 if self._loop_started is None else time.perf_counter() - self._loop_started
        return self.train_seconds + running

    def out_of_time(self) -> bool:
        limit = self.config.max_minutes
        return limit is not None and self.elapsed_s() >= 60.0 * limit

    def schedule_position(self, step: int) -> float:
        """The step the learning-rate schedule is at: ``step``, or further on when the time limit comes first."""
        if self.config.max_minutes is None:
            return float(step)
        return max(float(step), self.elapsed_s() / (60.0 * self.config.max_minutes) * self.total_steps)

    # --- the loop ----------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Train to ``total_steps`` (or ``max_minutes``), checkpoint, export ``model/``; returns the summary."""
        from torch.utils.tensorboard import SummaryWriter
        from tqdm import tqdm

        self.out.mkdir(parents=True, exist_ok=True)
        _write_json(self.out / "config.json", config_json(self.config))
        config = self.config
        writer = SummaryWriter(str(self.out / "tensorboard"))
        window = _Throughput()
        first, total = _Throughput(), _Throughput()  # the first step pays for warm-up: kept apart
        self._loop_started = time.perf_counter()
        try:
            with tqdm(total=self.total_steps, initial=self.step, unit="step", desc="finetune",
                      disable=not self.show_progress) as bar:
                while self.step < self.total_steps and not self.out_of_time():
                    started = time.perf_counter()
                    losses, tokens, samples = self._train_step()
                    elapsed = time.perf_counter() - started
                    window.add(tokens, samples, elapsed)
                    (total if first.steps else first).add(tokens, samples, elapsed)
                    self.step += 1
                    self.metrics.update(losses)
                    last = self.step == self.total_steps or self.out_of_time()
                    if self.step % config.log_every == 0 or last:
                        for name, value in losses.items():
                            writer.add_scalar(f"losses/{name}", value, self.step)
                        writer.add_scalar("charts/learning_rate", self.scheduler.get_last_lr()[0], self.step)
                        writer.add_scalar("perf/tokens_per_s", window.tokens_per_s, self.step)
                        writer.add_scalar("perf/samples_per_s", window.samples_per_s, self.step)
                        shown = losses.get("answer_loss", losses.get("aux_action", math.nan))
                        bar.set_postfix(loss=f"{shown:.3f}", tok_s=f"{window.tokens_per_s:.0f}")
                        window = _Throughput()
                    if config.eval_every and self.held_out and (self.step % config.eval_every == 0 or last):
                        for name, value in self.eval_metrics().items():
                            self.metrics[name] = value
                            writer.add_scalar(f"losses/{name}", value, self.step)
                    if self.step % config.save_every == 0 or last:
                        self.save_checkpoint()
                    bar.update(1)
        finally:
            self.train_seconds = self.elapsed_s()
            self._loop_started = None
            writer.close()
        self.export()
        if not total.steps:  # a one-step run: its only step is all there is
            total = first
        summary = {
            "steps": self.step,
            "stopped_by": "steps" if self.step >= self.total_steps else "max_minutes",
            "train_seconds": self.train_seconds,
            **self.metrics,
            "tokens_per_s": total.tokens_per_s,
            "samples_per_s": total.samples_per_s,
            "train_samples": len(self.train),
            "eval_samples": len(self.held_out),
            "device": str(self.device),
            "precision": str(self.autocast_dtype or torch.float32).removeprefix("torch."),
            "trainable_parameters": sum(p.numel() for p in self.trainable.values()),
            **self.split,
        }
        _write_json(self.out / "summary.json", summary)
        return summary

    def _train_step(self) -> tuple[dict[str, float], int, int]:
        """One optimiser step over ``grad_accum`` micro-batches: (mean losses by tag leaf, input tokens, samples).

        The losses are ``answer_loss`` (absent in a step of the vision warm-up) and, with the
        auxiliary head, ``aux_action`` and ``aux_action_accuracy``.
        """
        config = self.config
        self.model.train()
        is_vision_warmup = self.step < config.vision_warmup_steps
        losses: dict[str, list[float]] = {}
        tokens, samples = 0, 0
        try:
            for micro in range(config.grad_accum):
                indices = batch_indices(
                    self.step * config.grad_accum + micro, config.batch_size, len(self.train), config.seed
                )
                examples = [self.train[i] for i in indices]
                batch = self._to_device(encode_batch(self.processor, examples))
                with self._autocast():
                    if is_vision_warmup:  # the tower, the projector and the head; the decoder waits
                        self.model.get_image_features(pixel_values=batch["pixel_values"])
                        loss = torch.zeros((), device=self.device)
                    else:
                        loss = self.model(**batch).loss
                        losses.setdefault("answer_loss", []).append(float(loss.detach()))
                if self.aux_head is not None:
                    aux_loss, accuracy = self._aux_action(examples)
                    loss = loss + config.aux_action_weight * aux_loss
                    losses.setdefault("aux_action", []).append(float(aux_loss.detach()))
                    losses.setdefault("aux_action_accuracy", []).append(float(accuracy))
                self.scaler.scale(loss / config.grad_accum).backward()
                tokens += count_tokens(batch)[0]
                samples += len(indices)
            if config.max_grad_norm > 0:
                self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_(self._optimised(), config.max_grad_norm)
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad(set_to_none=True)
            self.scheduler.step()
        except torch.cuda.OutOfMemoryError:
            raise UserError(
                f"out of GPU memory at --batch-size {config.batch_size}: try --batch-size "
                f"{max(1, config.batch_size // 2)} --grad-accum {config.grad_accum * 2} (the same effective batch), "
                "--gradient-checkpointing, or --lora"
            ) from None
        for name in ("answer_loss", "aux_action"):
            if name in losses and not math.isfinite(losses[name][-1]):
                raise UserError(
                    f"the {name.replace('_', ' ')} became {losses[name][-1]} at step {self.step + 1}; lower "
                    f"--learning-rate (now {config.learning_rate:g}) or use --precision fp32/bf16"
                )
        return {name: float(np.mean(values)) for name, values in losses.items()}, tokens, samples

    def _aux_action(self, examples: list) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cross-entropy, accuracy)`` of the auxiliary head on the image tokens of the latest forward pass."""
        contexts, classes = (torch.from_numpy(a).to(self.device) for a in action_targets(examples))
        logits = self.aux_head(self.image_tap.take(len(examples)), contexts)
        return action_loss(logits, classes)

    def _optimised(self) -> list[torch.nn.Parameter]:
        """Every weight the optimiser steps: the model's trainable ones, then the auxiliary head's."""
        head = [] if self.aux_head is None else list(self.aux_head.parameters())
        return [*self.trainable.values(), *head]

    def eval_metrics(self) -> dict[str, float]:
        """Held-out losses (tag leaves) on ``eval_samples`` held-out examples spread over the episodes (a fixed set)."""
        stride = max(1, len(self.held_out) // self.config.eval_samples)
        return self._eval_on(self.held_out[::stride][: self.config.eval_samples])

    def eval_loss_on(self, examples: list) -> float:
        """Mean teacher-forced answer loss per answer token over ``examples``."""
        return self._eval_on(examples)["eval_answer_loss"]

    @torch.no_grad()
    def _eval_on(self, examples: list) -> dict[str, float]:
        """``eval_answer_loss`` per answer token over ``examples``; with the head, its loss and accuracy per sample."""
        self.model.eval()
        total, weight = 0.0, 0
        aux_total, aux_correct = 0.0, 0.0
        for start in range(0, len(examples), self.config.batch_size):
            chunk = examples[start : start + self.config.batch_size]
            batch = self._to_device(encode_batch(self.processor, chunk))
            with self._autocast():
                loss = self.model(**batch).loss
            answer_tokens = count_tokens(batch)[1]
            total += float(loss) * answer_tokens
            weight += answer_tokens
            if self.aux_head is not None:
                aux_loss, accuracy = self._aux_action(chunk)
                aux_total += float(aux_loss) * len(chunk)
                aux_correct += float(accuracy) * len(chunk)
        metrics = {"eval_answer_loss": total / max(1, weight)}
        if self.aux_head is not None:
            metrics["eval_aux_action"] = aux_total / max(1, len(examples))
            metrics["eval_aux_action_accuracy"] = aux_correct / max(1, len(examples))
        return metrics

    def checkpoint_weights(self) -> dict[str, torch.Tensor]:
        """The trained weights a checkpoint holds (LoRA adapters, or every trainable weight), on CPU."""
        return _cpu_copy(self.trainable)

    def _autocast(self) -> torch.autocast:
        return torch.autocast(self.device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None)

    def _to_device(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        moved = {}
        for key, value in batch.items():
            value = value.to(self.device)
            if value.is_floating_point() and self.autocast_dtype is not None and self.config.method == "lora":
                value = value.to(self.autocast_dtype)  # pixels in the frozen tower's dtype
            moved[key] = value
        return moved

    # --- outputs -----------------------------------------------------------------------------

    def save_checkpoint(self) -> Path:
        path = self.out / "checkpoint.pt"
        state = {
            "format": CHECKPOINT_FORMAT,
            "step": self.step,
            "config": config_json(self.config),
            "trainable": self.checkpoint_weights(),
            **({} if self.aux_head is None else {"aux_head": _cpu_copy(self.aux_head.state_dict())}),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "metrics": self.metrics,
            "train_seconds": self.elapsed_s(),
        }
        with replaced_atomically(path) as tmp:
            torch.save(state, tmp)
        return path

    def export(self) -> Path:
        """Write ``model/``: plain transformers weights (LoRA merged), processor and advisor card."""
        from vlm_server.backends.hf_checks import ADVISOR_CARD

        model = merged(self.model) if self.config.method == "lora" else self.model
        final = self.out / "model"
        partial = self.out / ".model.partial"
        shutil.rmtree(partial, ignore_errors=True)
        model.save_pretrained(partial)
        self.processor.save_pretrained(partial)
        _write_json(
            partial / ADVISOR_CARD,
            {
                "image_hw": list(self.image_hw),
                "base_model": str(self.config.model),
                "method": self.config.method,
                "steps": self.step,
                "train_seconds": round(self.train_seconds, 1),
                "data": self.config.data if isinstance(self.config.data, str) else list(self.config.data),
                "eval_fraction": self.config.eval_fraction,
                "split_seed": self.config.split_seed,
                # {network hash: town} of the training episodes: `vlm evaluate --split other-towns`
                # checks a dataset against it even after the training data is gone
                "training_towns": networks_of(self.train),
                "trained_by": "found-rl vlm finetune",
            },
        )
        if final.exists():
            stale = self.out / ".model.stale"
            shutil.rmtree(stale, ignore_errors=True)
            os.replace(final, stale)
            os.replace(partial, final)
            shutil.rmtree(stale)
        else:
            os.replace(partial, final)
        if self.config.method == "lora":
            self.model = model
        return final


class _Throughput:
    """Tokens and samples over time (summed step times, so logging and evaluation are not counted)."""

    def __init__(self) -> None:
        self.tokens = self.samples = self.steps = 0
        self.seconds = 0.0

    def add(self, tokens: int, samples: int, seconds: float) -> None:
        self.tokens += tokens
        self.samples += samples
        self.steps += 1
        self.seconds += seconds

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else float("nan")


def _warmup_cosine(warmup_steps: int, total_steps: int):
    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return factor


def _cpu_copy(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().cpu().clone() for name, tensor in tensors.items()}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    with replaced_atomically(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2))

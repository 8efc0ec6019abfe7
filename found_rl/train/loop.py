"""The training loop: FAST collection, the advisor label path, updates, evaluation, checkpoints.

One lock-step of the loop::

    sampler.step()            N clips act with one batched policy call, step in parallel
    replay.add(...)           valid transitions only (FAST padding is never stored)
    advisor.submit(...)       one request per transition about o_t, built from o_t's own info
    advisor.collect(...)      answers that arrived are attached to o_t's replay entry by step id
    learner.update(...) × k   k from the update-to-data ratio, once past learning_starts
    evaluate / checkpoint     at their env-step marks (checkpoints at FAST round boundaries)

Learners never import this package (STYLE §6): they see replay batches and return logs.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fast_sampler import FastSampler, StepBatch, make_executor
from found_rl.algos.sac import SAC, SacConfig
from found_rl.checkpoint import save_checkpoint
from found_rl.models.encoders import PRESET_BEV_POOL, network_preset
from found_rl.models.observation import obs_spec_from_space, obs_to_tensor
from found_rl.train import tags
from found_rl.train.checkpointing import (
    load_run_checkpoint,
    restore_rng_states,
    rng_states,
    save_run_checkpoint,
)
from found_rl.train.config import RunConfig
from found_rl.train.envs import make_training_env
from found_rl.train.evaluation_sets import (
    NO_EVALUATION,
    EvaluationPlan,
    EvaluationSet,
    EvaluationSets,
    plan_evaluation_sets,
)
from found_rl.train.labels import AdvisorLink
from found_rl.train.run_folder import RunFolder, append_jsonl, read_jsonl, truncate_jsonl
from found_rl.train.server import SpawnedServer

log = logging.getLogger(__name__)

ACTION_DIM = 2


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: 'cuda' was asked for, but torch sees no CUDA device here; use 'cpu' or 'auto'")
    return torch.device(name)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def torch_threads(asked: int) -> int:
    """The learner's torch threads: ``asked``, at most the usable cores (0: one less than them).

    More threads than cores only spin against each other (issue 10: two threads on two busy
    cores ran 14× slower than one), so a larger ``torch_threads`` is capped, with a warning.
    """
    cores = usable_cores()
    if asked > cores:
        log.warning("torch_threads: %d asked for, but this process may use %d cores; using %d", asked, cores, cores)
        return cores
    return asked or max(1, cores - 1)


@dataclass
class Counters:
    """Where the run stands; all of it goes into every checkpoint."""

    env_steps: int = 0
    lock_steps: int = 0
    """sampler steps (every clip at once): the clock of the repeatable label schedule"""
    updates: int = 0
    episodes: int = 0
    update_credit: float = 0.0
    next_evaluation: int = 0
    next_checkpoint: int = 0
    wall_s: float = 0.0
    """wall time of earlier sessions of this run (resumed runs add theirs)"""


@dataclass
class Timers:
    """Wall seconds per part of the loop, for ``perf/share_*`` and ``bench train``."""

    sampling: float = 0.0
    policy: float = 0.0
    updates: float = 0.0
    advisor: float = 0.0
    evaluation: float = 0.0
    checkpoint: float = 0.0
    started: float = field(default_factory=time.perf_counter)

    @contextmanager
    def measure(self, part: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            setattr(self, part, getattr(self, part) + time.perf_counter() - start)

    def shares(self) -> dict[str, float]:
        total = max(time.perf_counter() - self.started, 1e-9)
        parts = ("sampling", "policy", "updates", "advisor", "evaluation", "checkpoint")
        return {part: getattr(self, part) / total for part in parts}


@dataclass(frozen=True)
class TrainResult:
    """What a finished (or interrupted) run reports."""

    run_dir: Path
    env_steps: int
    updates: int
    wall_s: float
    env_steps_per_s: float
    updates_per_s: float
    shares: dict[str, float]
    last_evaluation: dict[str, Any] | None
    interrupted: bool
    label_coverage: float
    evaluation_sets: tuple[EvaluationSet, ...] = ()


class Interrupted(Exception):
    """SIGINT or SIGTERM reached the trainer (exit code 130 after the final checkpoint)."""


@contextmanager
def _interrupt_on_signals() -> Iterator[None]:
    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class Trainer:
    """Trains a policy as ``config`` says, into ``run_dir``.

    Args:
        config: the validated run config.
        run_dir: the run folder (created, or resumed when ``resume``).
        resume: continue the run in ``run_dir`` from its checkpoint.
        show_progress: draw a progress bar (tqdm) on stderr.
    """

    def __init__(self, config: RunConfig, run_dir: Path, *, resume: bool = False, show_progress: bool = True):
        self.config = config
        self.folder = RunFolder(Path(run_dir))
        self.resume = resume
        self.show_progress = show_progress
        self.counters = Counters()
        self.timers = Timers()
        self.device = resolve_device(config.device)
        self.warmup_rng = np.random.default_rng([config.seed, 1])
        self.sample_rng = np.random.default_rng([config.seed, 2])
        self.last_evaluation: dict[str, Any] | None = None
        self._evaluated_at = -1
        self._session_start = time.perf_counter()
        self._session_first_step = self._session_first_update = 0
        self._returns = np.zeros(config.sampler.clips)  # running episode returns, for charts/
        self._lengths = np.zeros(config.sampler.clips, np.int64)  # valid steps of each running episode
        self._credited_steps = config.learner.learning_starts  # env steps already turned into update credit
        self.references: dict[str, dict[str, Any]] = {}
        self._last_actor_logs: dict[str, float] = {}

    # ------------------------------------------------------------------ set-up
    @property
    def preset(self) -> str:
        name = self.config.network
        if name == "auto":
            name = "roach" if self.device.type == "cuda" else "cpu"
        return name

    def _network(self) -> Any:
        return network_preset(self.preset)

    def _sac_config(self) -> SacConfig:
        cfg, guidance = self.config.learner, self.config.guidance
        switches = (("vmr", guidance.vmr.enabled), ("awag", guidance.awag.enabled),
                    ("clip_bonus", guidance.clip_bonus.enabled))
        terms = [term for term, on in switches if on]
        return SacConfig(
            gamma=cfg.gamma, tau=cfg.tau, batch_size=cfg.batch_size, policy_lr=cfg.policy_lr, q_lr=cfg.q_lr,
            alpha=cfg.alpha, autotune=cfg.autotune, drq_pad_px=cfg.drq_pad_px, guidance=tuple(terms),
            target_features=cfg.target_features,
            vmr_margin=guidance.vmr.margin, vmr_form=guidance.vmr.form,
            vmr_decay_start_steps=guidance.vmr.decay_start_steps, vmr_decay_end_steps=guidance.vmr.decay_end_steps,
            awag_beta=guidance.awag.beta, awag_max_weight=guidance.awag.max_weight, awag_coef=guidance.awag.coef,
            awag_schedule=guidance.awag.schedule, awag_horizon_steps=guidance.awag.horizon_steps,
            network=self._network(),
        )

    def _wants(self) -> tuple[bool, bool, bool]:
        """(advisor actions, CLIP bonuses, images in requests)."""
        advisor, guidance = self.config.advisor, self.config.guidance
        want_actions = advisor.enabled and guidance.needs_advice
        want_clip = advisor.enabled and guidance.clip_bonus.enabled
        image_for_vlm = want_actions and advisor.spawn not in (None, "expert")
        if advisor.urls:
            image_for_vlm = want_actions and advisor.send_image
        return want_actions, want_clip, want_clip or image_for_vlm

    # ------------------------------------------------------------------ the run
    def run(self) -> TrainResult:
        # Spare a core for the env workers and the advisor: torch's thread pool spin-waits, and
        # two threads on two busy cores ran 14× slower than one (issue 10).
        threads = torch_threads(self.config.torch_threads)
        torch.set_num_threads(threads)
        torch.manual_seed(self.config.seed)
        with ExitStack() as stack:
            return self._run(stack)

    def _run(self, stack: ExitStack) -> TrainResult:
        config, folder = self.config, self.folder
        if self.resume:
            state = load_run_checkpoint(folder.checkpoint)
            folder.update_config(config)
        else:
            state = None
            folder.create(config)
        plan = plan_evaluation_sets(config, folder.eval_routes) if config.evaluation.enabled else NO_EVALUATION
        want_actions, want_clip, with_image = self._wants()
        executor = make_executor(self._env_factories(plan, with_state=want_actions, with_image=with_image),
                                 config.sampler.executor)
        sampler = stack.enter_context(FastSampler(
            executor, self._act, rho=config.sampler.rho, horizon=config.sampler.horizon,
            seed=config.seed, seed_every_episode=True,
        ))
        self.sampler = sampler
        self._build_learner(obs_spec_from_space(sampler.observation_space))
        self.evaluator: EvaluationSets | None = None
        if plan.sets:
            self.evaluator = EvaluationSets(plan, config.evaluation.seed, PRESET_BEV_POOL[self.preset])
            stack.callback(self.evaluator.close)
        self.link = self._start_advisor(stack, want_actions, want_clip)
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(folder.root))
        stack.callback(self.writer.close)

        if state is not None:
            self._restore(state)
        else:
            self.counters.next_checkpoint = config.checkpoint.every_env_steps
        self._evaluate_references()
        interrupted = False
        try:
            with _interrupt_on_signals():
                self._loop()
        except Interrupted as exc:
            interrupted = True
            log.warning("interrupted (%s): writing a final checkpoint", exc)
        if not interrupted and self.evaluator is not None and self._evaluated_at != self.counters.env_steps:
            self._evaluate(self._final_mark())  # the final policy
        self._checkpoint(exact=sampler.at_round_boundary)
        save_checkpoint(folder.final_policy, self.learner.policy_spec, self._policy_state,
                        metadata={"env_steps": self.counters.env_steps})
        return self._result(interrupted)

    def _env_factories(self, plan: EvaluationPlan, *, with_state: bool, with_image: bool) -> list[Any]:
        """One env factory per clip; the clips spread over the training scenarios in turn.

        Only the first training town holds evaluation routes out (``evaluation.seen``).
        """
        scenarios = self.config.scenario
        return [
            functools.partial(
                make_training_env, str(scenarios[clip % len(scenarios)]),
                train_routes=plan.first_town_train_routes if clip % len(scenarios) == 0 else None,
                with_state=with_state, with_image=with_image, bev_pool=PRESET_BEV_POOL[self.preset],
            )
            for clip in range(self.config.sampler.clips)
        ]

    def _final_mark(self) -> int:
        """The mark of the last evaluation: the env-step budget when the run used it up."""
        budget = self.config.budget.env_steps
        steps = self.counters.env_steps
        return budget if budget is not None and steps >= budget else steps

    def _build_learner(self, obs_spec: Any) -> None:
        """The learner and its storage: SAC with a replay buffer, or PPO with FAST rollouts."""
        config = self.config
        self.replay: Any = None
        self.rollout: Any = None
        if config.algorithm in ("sac", "drqv2"):
            from found_rl.storage.replay import ReplayBuffer

            if config.algorithm == "sac":
                self.learner: Any = SAC(obs_spec, ACTION_DIM, self._sac_config(), device=self.device, seed=config.seed)
            else:
                self.learner = self._drqv2(obs_spec)
            self.replay = ReplayBuffer(
                config.learner.replay_capacity, obs_spec, ACTION_DIM, num_envs=config.sampler.clips, device=self.device
            )
            self.labelled = self.replay
            return
        from found_rl.algos.ppo import PPO, PpoConfig
        from found_rl.storage.rollout import RolloutStorage

        cfg = config.learner
        ppo_config = PpoConfig(
            learning_rate=cfg.policy_lr, total_timesteps=config.budget.env_steps or 1_000_000, gamma=cfg.gamma,
            update_epochs=cfg.update_epochs, num_minibatches=cfg.num_minibatches,
            guidance=("clip_bonus",) if config.guidance.clip_bonus.enabled else (), network=self._network(),
        )
        self.learner = PPO(obs_spec, ppo_config.action_kind, ACTION_DIM, ppo_config, self.device, config.seed)
        self.rollout = RolloutStorage(
            cfg.rollout_steps, config.sampler.clips, obs_spec, (ACTION_DIM,), device=self.device
        )
        self.labelled = self.rollout

    def _drqv2(self, obs_spec: Any) -> Any:
        """DrQ-v2 (docs/method.md §7) from the run config; guidance fields the config leaves at
        their defaults keep DrQ-v2's own (AWAG: the cosine schedule with c = 0.03)."""
        from dataclasses import fields

        from found_rl.algos.drqv2 import DrQV2, DrQV2Config

        sac = self._sac_config()
        cfg, guidance = self.config.learner, self.config.guidance
        explicit = {f"vmr_{k}" for k in guidance.vmr.model_fields_set} | {
            f"awag_{k}" for k in guidance.awag.model_fields_set}
        own = {"max_grad_norm", "tau", "awag_action_eps"}  # DrQ-v2's values, not SAC's
        shared = {f.name for f in fields(DrQV2Config)} & {f.name for f in fields(SacConfig)} - own
        overrides = {name: getattr(sac, name) for name in shared
                     if not name.startswith(("vmr_", "awag_")) or name in explicit}
        overrides.update(actor_lr=cfg.policy_lr, critic_lr=cfg.q_lr, drq_pad_px=cfg.drq_pad_px or 4)
        return DrQV2(obs_spec, ACTION_DIM, DrQV2Config(**overrides), device=self.device, seed=self.config.seed)

    @property
    def _policy_state(self) -> dict[str, torch.Tensor]:
        network = self.learner.actor if self.replay is not None else self.learner.agent
        return network.state_dict()

    def _start_advisor(self, stack: ExitStack, want_actions: bool, want_clip: bool) -> AdvisorLink | None:
        advisor = self.config.advisor
        if not (want_actions or want_clip):
            return None
        urls = advisor.urls
        if advisor.spawn:
            server = SpawnedServer(
                advisor.spawn, advisor.spawn_options, advisor.clip, advisor.clip_options,
                log_path=self.folder.server_log, ready_timeout_s=advisor.ready_timeout_s,
            )
            stack.enter_context(server)
            urls = [server.url]
            log.info("advisor server %s started (pid %s)", server.url, server.pid)
        from vlm_server.client import BackgroundClient

        client = BackgroundClient(urls, timeout_s=advisor.timeout_s, max_retries=2)
        lag = advisor.label_lag_steps if advisor.label_mode == "repeatable" else None
        link = AdvisorLink(client, want_actions=want_actions, want_clip=want_clip, lag_steps=lag)
        stack.callback(link.close)
        return link

    # ------------------------------------------------------------------ acting
    def _act(self, obs: Any) -> Any:
        with self.timers.measure("policy"):
            if self.rollout is not None:  # PPO: sample, and keep log π and V for the rollout
                tensors, _ = obs_to_tensor(obs, self.learner.obs_spec, self.device)
                actions, log_probs, values = self.learner.step(tensors)
                return actions.cpu().numpy(), {"log_probs": log_probs, "values": values}
            if self.counters.env_steps < self.config.learner.learning_starts:
                return self.warmup_rng.uniform(-1.0, 1.0, (self.config.sampler.clips, ACTION_DIM)).astype(np.float32)
            if self.config.algorithm == "drqv2":  # exploration noise follows its σ(t) schedule
                return self.learner.act(obs, global_step=self.counters.env_steps)
            return self.learner.act(obs, deterministic=False)

    # ------------------------------------------------------------------ the loop
    def _budget_left(self, session_start: float) -> bool:
        budget = self.config.budget
        if budget.env_steps is not None and self.counters.env_steps >= budget.env_steps:
            return False
        elapsed = self.counters.wall_s + time.perf_counter() - session_start
        return budget.wall_time_s is None or elapsed < budget.wall_time_s

    def _loop(self) -> None:
        from tqdm import tqdm

        config, counters = self.config, self.counters
        session_start = time.perf_counter()
        self._session_start = session_start
        total = config.budget.env_steps
        with tqdm(total=total, initial=counters.env_steps, unit="step", disable=not self.show_progress,
                  dynamic_ncols=True, desc="train") as bar:
            if self.evaluator is not None and counters.env_steps >= counters.next_evaluation:
                self._evaluate(counters.next_evaluation)
            last_log = time.perf_counter()
            while self._budget_left(session_start):
                before = counters.env_steps
                with self.timers.measure("sampling"):
                    batch = self.sampler.step()
                self._store(batch)
                self._log_episodes(batch)
                self._update()
                if self.evaluator is not None and counters.env_steps >= counters.next_evaluation:
                    self._evaluate(counters.next_evaluation)
                if counters.env_steps >= counters.next_checkpoint and self._can_checkpoint():
                    self._checkpoint(exact=self.sampler.at_round_boundary)
                bar.update(counters.env_steps - before)
                if time.perf_counter() - last_log >= 2.0:
                    last_log = time.perf_counter()
                    bar.set_postfix_str(self._progress_text(), refresh=False)
                    self._log_perf()

    def _store(self, batch: StepBatch) -> None:
        valid = batch.valid
        step_ids = np.stack([batch.clip_index, batch.episode_index, batch.step_index], axis=1)
        if self.replay is not None:
            self.replay.add(batch.obs, batch.actions, batch.rewards, batch.next_obs, batch.terminated,
                            batch.truncated, step_ids=step_ids, valid=valid)
        else:
            self._store_rollout(batch, step_ids)
        self.counters.env_steps += int(valid.sum())
        self.counters.lock_steps += 1
        if self.link is None:
            return
        with self.timers.measure("advisor"):
            self.link.submit_lockstep(batch, self.counters.env_steps, self.counters.lock_steps)
            self.link.collect(self._attach, self.counters.env_steps, self.counters.lock_steps)

    def _store_rollout(self, batch: StepBatch, step_ids: np.ndarray) -> None:
        """One lock-step into the PPO rollout; V(o_{t+1}) bootstraps rows cut by truncation."""
        def tensor(array: Any, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.as_tensor(np.asarray(array), dtype=dtype, device=self.device)

        obs, _ = obs_to_tensor(batch.obs, self.learner.obs_spec, self.device)
        next_obs, _ = obs_to_tensor(batch.next_obs, self.learner.obs_spec, self.device)
        final_values = self.learner.value(next_obs) if (batch.truncated & batch.valid).any() else None
        self.rollout.add(
            obs, tensor(batch.actions), tensor(batch.extras["log_probs"]), tensor(batch.extras["values"]),
            tensor(batch.rewards), tensor(batch.terminated, torch.bool), tensor(batch.truncated, torch.bool),
            tensor(batch.valid), final_values=final_values, step_ids=[tuple(row) for row in step_ids],
        )
        self._last_next_obs = next_obs

    def _attach(self, step_id: Any, action: np.ndarray | None, bonus: float | None) -> bool:
        return self.labelled.attach_labels(tuple(step_id), action=action, clip_bonus=bonus)

    def _update(self) -> None:
        if self.rollout is not None:
            self._update_ppo()
            return
        config, counters = self.config, self.counters
        if counters.env_steps < config.learner.learning_starts:
            return
        counters.update_credit += self._new_steps_since_update()
        logs: dict[str, float] = {}
        with self.timers.measure("updates"):
            while counters.update_credit >= 1.0:
                batch = self._sample_batch()
                logs = self.learner.update(batch, counters.env_steps)
                counters.updates += 1
                counters.update_credit -= 1.0
                if "losses/actor_loss" in logs:
                    self._last_actor_logs = {k: v for k, v in logs.items() if k not in SAC_CRITIC_ONLY}
        if logs and counters.updates % 20 == 0:
            for tag, value in {**self._last_actor_logs, **logs}.items():
                self.writer.add_scalar(tag, value, counters.env_steps)

    def _sample_batch(self) -> Any:
        cfg = self.learner.config
        if self.config.algorithm == "drqv2":  # n-step returns, windows cut at episode ends
            return self.replay.sample(cfg.batch_size, self.sample_rng, n_step=cfg.n_step, gamma=cfg.gamma)
        return self.replay.sample(cfg.batch_size, self.sample_rng)

    def _update_ppo(self) -> None:
        """A full rollout: masked GAE (padding never read), then SMPO-masked PPO epochs."""
        if self.rollout.step < self.rollout.num_steps:
            return
        if self.link is not None:  # the rollout's last bonuses, before its returns are computed
            with self.timers.measure("advisor"):
                self.link.flush(self._attach, self.counters.env_steps)
        with self.timers.measure("updates"):
            samples = self.learner.compute_returns(self.rollout, self.learner.value(self._last_next_obs))
            logs = self.learner.update(samples, self.counters.env_steps)
            self.rollout.reset()
        self.counters.updates += 1
        for tag, value in logs.items():
            self.writer.add_scalar(tag, value, self.counters.env_steps)

    def _new_steps_since_update(self) -> float:
        """Update credit earned since the last call: valid env steps × updates_per_step."""
        steps = self.counters.env_steps - self._credited_steps
        self._credited_steps = self.counters.env_steps
        return max(0, steps) * self.config.learner.updates_per_step

    # ------------------------------------------------------------------ logging
    def _log_episodes(self, batch: StepBatch) -> None:
        """``charts/`` for every episode that ended, cut by FAST's global truncation included
        (charting only self-ended episodes would read training RC low: survivorship bias)."""
        self._returns += np.where(batch.valid, batch.rewards, 0.0)
        self._lengths += batch.valid
        for clip in np.flatnonzero(batch.valid & (batch.terminated | batch.truncated)):
            info = batch.infos[clip]
            summary = info.get("episode")
            episode_return, self._returns[clip] = self._returns[clip], 0.0
            length, self._lengths[clip] = int(self._lengths[clip]), 0
            completion = summary.route_completion if summary is not None else info.get("route_completion")
            self.counters.episodes += 1
            step = self.counters.env_steps
            self.writer.add_scalar(tags.EPISODIC_RETURN, episode_return, step)
            self.writer.add_scalar(tags.EPISODIC_LENGTH, length, step)
            self.writer.add_scalar(tags.EPISODE_CUT_BY_FAST, float(summary is None), step)
            if completion is not None:
                self.writer.add_scalar(tags.ROUTE_COMPLETION, float(completion), step)

    def _log_perf(self) -> None:
        step = self.counters.env_steps
        elapsed = time.perf_counter() - self._session_start
        self.writer.add_scalar("perf/SPS", self._session_steps() / max(elapsed, 1e-9), step)
        self.writer.add_scalar("perf/updates_per_s", self._session_updates() / max(elapsed, 1e-9), step)
        for part, share in self._shares().items():
            self.writer.add_scalar(f"perf/share_{part}", share, step)
        self.writer.add_scalar("perf/valid_fraction", self.sampler.stats.valid_fraction, step)
        if self.link is not None:
            stats = self.link.stats
            self.writer.add_scalar("guidance/advisor_up", float(self.link.is_up), step)
            self.writer.add_scalar("guidance/label_coverage_replay", self._label_coverage(), step)
            self.writer.add_scalar("guidance/labels_in_flight", self.link.in_flight, step)
            self.writer.add_scalar("guidance/labels_dropped", stats.dropped, step)
            self.writer.add_scalar("guidance/labels_failed", stats.failed, step)
            self.writer.add_scalar("guidance/labels_skipped", stats.skipped, step)
            latencies = stats.drain_latencies()
            if latencies.size:
                self.writer.add_scalar("guidance/label_latency_steps", float(latencies.mean()), step)
                self.writer.add_histogram(tags.LATENCY_HISTOGRAM, latencies, step)

    def _shares(self) -> dict[str, float]:
        shares = self.timers.shares()
        shares["sampling"] = max(0.0, shares["sampling"] - shares["policy"])  # the policy runs inside step()
        return shares

    def _session_steps(self) -> int:
        return self.counters.env_steps - self._session_first_step

    def _session_updates(self) -> int:
        return self.counters.updates - self._session_first_update

    def _progress_text(self) -> str:
        elapsed = max(time.perf_counter() - self._session_start, 1e-9)
        parts = [f"{self._session_steps() / elapsed:.0f} steps/s", f"{self._session_updates() / elapsed:.1f} upd/s"]
        if self.link is not None:
            parts.append(f"labels {100 * self._label_coverage():.0f}%")
            if not self.link.is_up:
                parts.append("advisor DOWN")
        if self.last_evaluation is not None:
            parts.append(f"eval RC {self.last_evaluation['route_completion']:.2f}")
        return " | ".join(parts)

    # ------------------------------------------------------------------ evaluation
    def _evaluate_references(self) -> None:
        if self.evaluator is None:
            return
        import json

        from found_rl.atomic import replaced_atomically

        stored = json.loads(self.folder.references.read_text()) if self.folder.references.is_file() else {}
        for name in self.config.evaluation.references:
            if name in stored:
                continue
            log.info("evaluating the reference policy %r on %d evaluation routes", name, self.evaluator.num_routes)
            row = self.evaluator.evaluate(
                name, name, self.folder.evaluations / f"reference_{name}", None, {"reference": name}
            )
            stored[name] = row
            with replaced_atomically(self.folder.references) as tmp:
                tmp.write_text(json.dumps(stored, indent=2))
        self.references = stored

    def _evaluate(self, mark: int) -> None:
        """Evaluate the current policy; ``mark`` is the env step the evaluation was due at (the
        curves of several seeds align on it, whatever env-step count each run had reached)."""
        counters, folder = self.counters, self.folder
        step = counters.env_steps
        self._evaluated_at = step
        with self.timers.measure("evaluation"):
            save_checkpoint(folder.eval_policy, self.learner.policy_spec, self._policy_state,
                            metadata={"env_steps": step})
            video_dir = folder.videos / f"eval_{step:010d}" if self.config.evaluation.video else None
            scores = self.evaluator.evaluate(
                f"checkpoint:{folder.eval_policy}", "policy", folder.evaluations / f"eval_{step:010d}", video_dir,
                {"env_steps": step, "mark": mark},
            )
        row = {"mark": mark, "env_steps": step, "updates": counters.updates,
               "wall_s": counters.wall_s + time.perf_counter() - self._session_start, **scores}
        if self.link is not None:
            row["label_coverage"] = self._label_coverage()
            row["label_latency_steps"] = self.link.stats.mean_latency
        append_jsonl(folder.evaluations_jsonl, row)
        self.last_evaluation = row
        self.writer.add_scalar("charts/eval_route_completion", scores["route_completion"], step)
        self.writer.add_scalar("charts/eval_driving_score", scores["driving_score"], step)
        self.writer.add_scalar("charts/eval_infraction_penalty", scores["infraction_penalty"], step)
        for kind, rate in scores["infractions_per_km"].items():
            self.writer.add_scalar(f"{tags.EVAL_RATE_PREFIX}{kind}", rate, step)
        if self.show_progress:
            from found_rl.train.report import print_evaluation

            print_evaluation(row, self.references)
        every = self.config.evaluation.every_env_steps
        counters.next_evaluation = (step // every + 1) * every

    # ------------------------------------------------------------------ checkpoints
    def _can_checkpoint(self) -> bool:
        """SAC: at a FAST round boundary (no episode in flight: the resume is exact). PPO: right
        after an update (no half rollout to save); episodes in flight restart on resume."""
        if self.rollout is not None:
            return self.rollout.step == 0
        return self.sampler.at_round_boundary

    def _checkpoint(self, *, exact: bool) -> None:
        counters = self.counters
        every = self.config.checkpoint.every_env_steps
        counters.next_checkpoint = (counters.env_steps // every + 1) * every  # saved: a resume keeps the schedule
        with self.timers.measure("checkpoint"):
            counters_state = dict(counters.__dict__)
            counters_state["wall_s"] = counters.wall_s + time.perf_counter() - self._session_start
            training_state = {
                "learner": self.learner.state_dict(),
                "sampler": self.sampler.state_dict(),
                "counters": counters_state,
                "credited_steps": self._credited_steps,
                "rng": rng_states({"warmup": self.warmup_rng, "sample": self.sample_rng}),
                "labels": None if self.link is None else self.link.state_dict(),
                "returns": self._returns.tolist(),
                "lengths": self._lengths.tolist(),
                "exact": exact,
                "config": self.config.to_yaml_dict(),
            }
            replay = self.replay if self.config.checkpoint.save_replay else None
            save_run_checkpoint(self.folder.checkpoint, self.learner.policy_spec, self._policy_state,
                                training_state, replay, counters.env_steps)

    def _restore(self, state: dict[str, Any]) -> None:
        self.learner.load_state_dict(state["learner"])
        self.sampler.load_state_dict(state["sampler"])
        for key, value in state["counters"].items():
            setattr(self.counters, key, value)
        self._credited_steps = int(state["credited_steps"])
        restore_rng_states(state["rng"], {"warmup": self.warmup_rng, "sample": self.sample_rng})
        if self.link is not None and state.get("labels") is not None:
            self.link.load_state_dict(state["labels"])
        if "returns" in state:
            self._returns[:] = state["returns"]
            self._lengths[:] = state["lengths"]
        if state.get("replay_file") and self.replay is not None:
            self.replay.load(self.folder.checkpoints / state["replay_file"])
        truncate_jsonl(self.folder.evaluations_jsonl, self.counters.env_steps)
        evaluations = read_jsonl(self.folder.evaluations_jsonl)
        self.last_evaluation = evaluations[-1] if evaluations else None
        self._session_first_step = self.counters.env_steps
        self._session_first_update = self.counters.updates
        if not state.get("exact", True):
            log.warning("the checkpoint was taken inside a round: the resumed run starts fresh episodes there")

    def _label_coverage(self) -> float:
        """Fraction of stored transitions with their advisor label (SAC replay; PPO: CLIP bonuses)."""
        if self.replay is not None:
            return self.replay.label_coverage()["advisor" if self.link is None or self.link.want_actions else "clip"]
        valid = self.rollout.valid[: self.rollout.step]
        return float((self.rollout.has_clip[: self.rollout.step] * valid).sum() / valid.sum().clamp(min=1))

    def _result(self, interrupted: bool) -> TrainResult:
        elapsed = max(time.perf_counter() - self._session_start, 1e-9)
        return TrainResult(
            run_dir=self.folder.root,
            env_steps=self.counters.env_steps,
            updates=self.counters.updates,
            wall_s=self.counters.wall_s + elapsed,
            env_steps_per_s=self._session_steps() / elapsed,
            updates_per_s=self._session_updates() / elapsed,
            shares=self._shares(),
            last_evaluation=self.last_evaluation,
            interrupted=interrupted,
            label_coverage=self._label_coverage(),
            evaluation_sets=self.evaluator.plan.sets if self.evaluator is not None else (),
        )


SAC_CRITIC_ONLY = frozenset({"losses/qf1_values", "losses/qf2_values", "losses/qf1_loss", "losses/qf2_loss",
                             "losses/qf_loss", "guidance/vmr_loss", "guidance/vmr_coef",
                             "guidance/label_coverage", "guidance/clip_coverage", "guidance/clip_bonus_mean"})

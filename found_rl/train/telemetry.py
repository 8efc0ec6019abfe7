"""What a run tells while it trains: TensorBoard scalars (every tag from :mod:`tags`), the
progress line, and the wall-time shares of the loop's parts.

The x-axis of every scalar is global env steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fast_sampler import StepBatch
from found_rl.train import tags

OFF_POLICY_LOG_EVERY = 20
"""off-policy learners write their logs every this many updates"""


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
        return {part: getattr(self, part) / total for part in tags.TIMED_PARTS}


class Telemetry:
    """The run's TensorBoard writer, timers and session clock, and its running episodes.

    Args:
        clips: the sampler's clips (one running episode each).
    """

    def __init__(self, clips: int) -> None:
        self.timers = Timers()
        self.writer: Any = None
        self.session_start = time.perf_counter()
        self.first_step = self.first_update = 0
        """env steps and updates the run had when this session started (resumed runs)"""
        self.learning_since: tuple[float, int, int] | None = None
        """(time, env steps, updates) at this session's first update"""
        self.returns = np.zeros(clips)  # running episode returns, for charts/
        self.lengths = np.zeros(clips, np.int64)  # valid steps of each running episode
        self._last_actor_logs: dict[str, float] = {}

    def open(self, root: Path) -> Any:
        """The TensorBoard writer into ``root``; the caller closes it."""
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(root))
        return self.writer

    # ------------------------------------------------------------------ the session
    def elapsed(self) -> float:
        return max(time.perf_counter() - self.session_start, 1e-9)

    def session_steps(self, env_steps: int) -> int:
        return env_steps - self.first_step

    def session_updates(self, updates: int) -> int:
        return updates - self.first_update

    def note_learning(self, counters: Any) -> None:
        """Remember when this session's first update happened (the loop's rates from there on)."""
        if self.learning_since is None and counters.updates > self.first_update:
            self.learning_since = (time.perf_counter(), counters.env_steps, counters.updates)

    def learning_rates(self, counters: Any) -> tuple[float, float]:
        """Env steps/s and updates/s since this session's first update (0, 0 before it)."""
        if self.learning_since is None:
            return 0.0, 0.0
        started, steps, updates = self.learning_since
        elapsed = max(time.perf_counter() - started, 1e-9)
        return (counters.env_steps - steps) / elapsed, (counters.updates - updates) / elapsed

    def shares(self) -> dict[str, float]:
        shares = self.timers.shares()
        shares["sampling"] = max(0.0, shares["sampling"] - shares["policy"])  # the policy runs inside step()
        return shares

    # ------------------------------------------------------------------ scalars
    def log_episodes(self, batch: StepBatch, counters: Any) -> None:
        """``charts/`` for every episode that ended, cut by FAST's global truncation included
        (charting only self-ended episodes would read training RC low: survivorship bias)."""
        self.returns += np.where(batch.valid, batch.rewards, 0.0)
        self.lengths += batch.valid
        for clip in np.flatnonzero(batch.valid & (batch.terminated | batch.truncated)):
            info = batch.infos[clip]
            summary = info.get("episode")
            episode_return, self.returns[clip] = self.returns[clip], 0.0
            length, self.lengths[clip] = int(self.lengths[clip]), 0
            completion = summary.route_completion if summary is not None else info.get("route_completion")
            counters.episodes += 1
            step = counters.env_steps
            self.writer.add_scalar(tags.EPISODIC_RETURN, episode_return, step)
            self.writer.add_scalar(tags.EPISODIC_LENGTH, length, step)
            self.writer.add_scalar(tags.EPISODE_CUT_BY_FAST, float(summary is None), step)
            if completion is not None:
                self.writer.add_scalar(tags.ROUTE_COMPLETION, float(completion), step)

    def log_perf(self, counters: Any, valid_fraction: float, link: Any, label_coverage: Callable[[], float]) -> None:
        """``perf/`` rates and shares, and with an advisor the ``guidance/`` label path."""
        step, elapsed = counters.env_steps, self.elapsed()
        self.writer.add_scalar(tags.SPS, self.session_steps(step) / elapsed, step)
        self.writer.add_scalar(tags.UPDATES_PER_S, self.session_updates(counters.updates) / elapsed, step)
        for part, share in self.shares().items():
            self.writer.add_scalar(tags.SHARE_PREFIX + part, share, step)
        self.writer.add_scalar(tags.VALID_FRACTION, valid_fraction, step)
        if link is None:
            return
        stats = link.stats
        self.writer.add_scalar(tags.ADVISOR_UP, float(link.is_up), step)
        self.writer.add_scalar(tags.LABEL_COVERAGE_REPLAY, label_coverage(), step)
        self.writer.add_scalar(tags.LABELS_IN_FLIGHT, link.in_flight, step)
        self.writer.add_scalar(tags.LABELS_DROPPED, stats.dropped, step)
        self.writer.add_scalar(tags.LABELS_FAILED, stats.failed, step)
        self.writer.add_scalar(tags.LABELS_SKIPPED, stats.skipped, step)
        latencies = stats.drain_latencies()
        if latencies.size:
            self.writer.add_scalar(tags.LABEL_LATENCY_STEPS, float(latencies.mean()), step)
            self.writer.add_histogram(tags.LATENCY_HISTOGRAM, latencies, step)

    def log_evaluation(self, scores: dict[str, Any], step: int) -> None:
        self.writer.add_scalar(tags.EVAL_ROUTE_COMPLETION, scores["route_completion"], step)
        self.writer.add_scalar(tags.EVAL_DRIVING_SCORE, scores["driving_score"], step)
        self.writer.add_scalar(tags.EVAL_INFRACTION_PENALTY, scores["infraction_penalty"], step)
        for kind, rate in scores["infractions_per_km"].items():
            self.writer.add_scalar(f"{tags.EVAL_RATE_PREFIX}{kind}", rate, step)

    def log_learner(self, logs: dict[str, float], step: int) -> None:
        """A learner's own tags, as it returned them."""
        for tag, value in logs.items():
            self.writer.add_scalar(tag, value, step)

    def note_off_policy_update(self, logs: dict[str, float], actor_step_tags: frozenset[str]) -> None:
        """Keep the actor's logs (``actor_step_tags``, the learner's registry entry) of an update
        that had an actor step (SAC delays them)."""
        if "losses/actor_loss" in logs:
            self._last_actor_logs = {k: v for k, v in logs.items() if k in actor_step_tags}

    def log_off_policy_updates(self, logs: dict[str, float], updates: int, step: int) -> None:
        """The last update's logs with the last actor logs, every :data:`OFF_POLICY_LOG_EVERY` updates."""
        if logs and updates % OFF_POLICY_LOG_EVERY == 0:
            self.log_learner({**self._last_actor_logs, **logs}, step)

    # ------------------------------------------------------------------ the progress bar
    def progress_text(self, counters: Any, link: Any, label_coverage: Callable[[], float],
                      last_evaluation: dict[str, Any] | None) -> str:
        elapsed = self.elapsed()
        parts = [f"{self.session_steps(counters.env_steps) / elapsed:.0f} steps/s",
                 f"{self.session_updates(counters.updates) / elapsed:.1f} upd/s"]
        if link is not None:
            parts.append(f"labels {100 * label_coverage():.0f}%")
            if not link.is_up:
                parts.append("advisor DOWN")
        if last_evaluation is not None:
            parts.append(f"eval RC {last_evaluation['route_completion']:.2f}")
        return " | ".join(parts)

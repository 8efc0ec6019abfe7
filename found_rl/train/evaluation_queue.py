"""The run's evaluations, one at a time on the evaluation workers, beside training.

Two kinds share the workers: the policy's snapshots at their marks, and the reference policies
(standing still, constant throttle, the expert) that every curve is read against. A policy
evaluation goes first whenever the workers are free; the references fill the time between them,
so neither holds up the loop at start-up. Each evaluation episode is seeded by its route and
repetition alone (``evaluation.runner.episode_seed``), so the order the two kinds interleave in,
which depends on timing, changes no score.

At most :data:`MAX_OUTSTANDING` policy evaluations are outstanding (running or waiting their
turn): one more waits for the oldest, which bounds the snapshots on disk. Rows are written in
mark order. Two, not one: the first evaluation (the untrained policy, which stands still until
each route's blocked limit) and the references can run past the next mark on a busy machine,
and the loop should not wait for them there.
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from found_rl.atomic import replaced_atomically
from found_rl.train.evaluation_sets import EvaluationSets

log = logging.getLogger(__name__)

MAX_OUTSTANDING = 2
"""policy evaluations running or waiting at once; another mark waits for the oldest"""


@dataclass(frozen=True)
class PendingEvaluation:
    """An evaluation of a policy snapshot: its row so far (mark, env steps, ...) and the snapshot
    the workers read. A checkpoint keeps it, so a resumed run finishes it."""

    row: dict[str, Any]
    snapshot: str


@dataclass(frozen=True)
class _Running:
    policy: PendingEvaluation | None
    """the policy evaluation the workers drive, or ``None`` for a reference"""
    reference: str | None
    started: float


class EvaluationQueue:
    """Starts, polls and finishes the run's evaluations on ``sets``; never blocks unless asked.

    Args:
        sets: the evaluation workers, one per town.
        references_path: ``references.json``: the references scored so far (a resumed run keeps
            them) and where each new score is written.
        results_dir: the run's ``evaluations/`` folder (one results file per evaluation and town).
        videos_dir: where each policy evaluation's video goes (``None``: no videos).
        on_policy_row: called with each policy evaluation's finished row, in mark order.
        waiting: a context entered around every wait for the workers (the loop's safe point and
            its ``evaluation`` timer).
    """

    def __init__(self, sets: EvaluationSets, references_path: Path, results_dir: Path, videos_dir: Path | None,
                 on_policy_row: Callable[[dict[str, Any]], None],
                 waiting: Callable[[], AbstractContextManager[Any]]) -> None:
        self.sets = sets
        self._references_path = references_path
        self._results_dir = results_dir
        self._videos_dir = videos_dir
        self._on_policy_row = on_policy_row
        self._waiting = waiting
        self.references: dict[str, dict[str, Any]] = (
            json.loads(references_path.read_text()) if references_path.is_file() else {})
        self._references_due: deque[str] = deque()
        self._policy_due: deque[PendingEvaluation] = deque()
        self._running: _Running | None = None

    # ------------------------------------------------------------------ what is asked
    def queue_references(self, names: Sequence[str]) -> None:
        """Score the reference policies not scored yet, in the time policy evaluations leave."""
        for name in names:
            if name not in self.references and name not in self._references_due:
                self._references_due.append(name)

    def submit(self, pending: PendingEvaluation) -> None:
        """Evaluate a policy snapshot once the workers are free and the earlier snapshots are done.

        Waits only while :data:`MAX_OUTSTANDING` policy evaluations are outstanding. The workers
        may still be building their envs: the evaluation starts once they are."""
        self.finish_policy(keep=MAX_OUTSTANDING - 1)
        self._policy_due.append(pending)
        self.poll()

    @property
    def outstanding_policies(self) -> list[PendingEvaluation]:
        """The policy evaluations running or waiting to run, oldest first (what a checkpoint keeps)."""
        running = [self._running.policy] if self._running is not None and self._running.policy is not None else []
        return [*running, *self._policy_due]

    # ------------------------------------------------------------------ progress
    def poll(self) -> None:
        """Finish the running evaluation if its result is in, then start the next (never waits)."""
        if self._running is not None and self.sets.is_done():
            self._finish_running()
        if self._running is None and self.sets.ready():
            self._start_next()

    def finish_policy(self, keep: int = 0) -> None:
        """Wait until at most ``keep`` policy evaluations are outstanding (a reference may still be
        running)."""
        while len(self.outstanding_policies) > keep:
            self._wait_running()
            self._start_next(wait_ready=True)

    def drain(self) -> None:
        """Wait for every evaluation asked for, the references included."""
        self._start_next(wait_ready=True)
        while self._running is not None:
            self._wait_running()
            self._start_next(wait_ready=True)

    # ------------------------------------------------------------------ the workers
    def _start_next(self, *, wait_ready: bool = False) -> None:
        """Start the next evaluation due, if the workers are free (and built, or waited for)."""
        if self._running is not None or (not self._policy_due and not self._references_due):
            return
        if wait_ready:
            with self._waiting():
                self.sets.wait_ready()
        if self._policy_due:
            pending = self._policy_due.popleft()
            step = pending.row["env_steps"]
            name = f"eval_{step:010d}"
            self.sets.start(f"checkpoint:{pending.snapshot}", "policy", self._results_dir / name,
                            None if self._videos_dir is None else self._videos_dir / name,
                            {"env_steps": step, "mark": pending.row["mark"]})
            self._running = _Running(pending, None, time.perf_counter())
        elif self._references_due:
            name = self._references_due.popleft()
            log.info("evaluating the reference policy %r on %d evaluation routes", name, self.sets.num_routes)
            self.sets.start(name, name, self._results_dir / f"reference_{name}", None, {"reference": name})
            self._running = _Running(None, name, time.perf_counter())

    def _wait_running(self) -> None:
        if self._running is None:
            return
        with self._waiting():
            self._finish_running()

    def _finish_running(self) -> None:
        running = self._running
        assert running is not None
        scores = self.sets.finish()
        self._running = None
        if running.policy is None:
            self.references[running.reference] = scores
            with replaced_atomically(self._references_path) as tmp:
                tmp.write_text(json.dumps(self.references, indent=2))
            return
        # how long the workers took, start to result (for sizing evaluation.routes_per_town)
        row = {**running.policy.row, **scores, "evaluation_wall_s": time.perf_counter() - running.started}
        Path(running.policy.snapshot).unlink(missing_ok=True)
        self._on_policy_row(row)

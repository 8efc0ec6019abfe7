"""The label path: advisor requests about o_t out, answers onto the storage entry of o_t.

Requests leave without blocking the loop (:class:`vlm_server.client.BackgroundClient`) and
answers are attached by step id (ARCHITECTURE §6), in one of two modes:

* **repeatable** (``lag_steps=L``): the answers to the requests of lock-step k are attached
  when lock-step k + L is stored, in request order; the loop waits only for an answer that is
  later than that. Which transitions carry a label at each update then depends on the seed
  alone, so a seed gives the same run, and a checkpoint carries the answers still due.
* **asynchronous** (``lag_steps=None``): each lock-step attaches whatever arrived (never waits).

An answer whose entry was overwritten meanwhile is dropped and counted. When no replica
answers, training goes on without labels: the link says so once, sends only an occasional
probe, and resumes as soon as a probe is answered.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from fast_sampler import StepBatch, StepId
from found_rl.errors import UserError
from found_rl.train.envs import advice_of
from vlm_server.client import advise_payload, clip_payload

log = logging.getLogger(__name__)

ADVISE, CLIP = "a", "c"

Attach = Callable[[StepId, np.ndarray | None, float | None], bool]
"""Attaches an advisor action and/or CLIP bonus to the entry of a step id; False if it is gone."""


class LabelClient(Protocol):
    """What the link needs of :class:`~vlm_server.client.BackgroundClient`."""

    def submit(self, item_id: str, payload: dict[str, Any], kind: str = "advise") -> None: ...

    def poll(self, wait_s: float = 0.0) -> list[tuple[str, dict[str, Any]]]: ...

    def close(self) -> None: ...


def item_id(kind: str, step_id: StepId) -> str:
    return f"{kind}:{step_id[0]}.{step_id[1]}.{step_id[2]}"


def parse_item_id(text: str) -> tuple[str, StepId]:
    kind, _, rest = text.partition(":")
    clip, episode, step = (int(part) for part in rest.split("."))
    return kind, StepId(clip, episode, step)


@dataclass
class LabelStats:
    """Counters since the run started, and the latencies since the last :meth:`drain_latencies`."""

    submitted: int = 0
    attached: int = 0
    dropped: int = 0
    """answers whose storage entry had been overwritten"""
    failed: int = 0
    """answers that carried an error (the advisor could not answer that item)"""
    skipped: int = 0
    """requests not sent while the advisor was down"""
    latencies: list[int] = field(default_factory=list)
    """env steps between a request and its attached answer (since the last drain)"""
    latency_total: int = 0
    """sum of every attached answer's latency, for the run's mean"""

    @property
    def mean_latency(self) -> float | None:
        return self.latency_total / self.attached if self.attached else None

    def drain_latencies(self) -> np.ndarray:
        values, self.latencies = np.asarray(self.latencies, np.int64), []
        return values

    def state_dict(self) -> dict[str, int]:
        return {key: value for key, value in asdict(self).items() if key != "latencies"}

    def load_state_dict(self, state: dict[str, int]) -> None:
        for key, value in state.items():
            setattr(self, key, int(value))


REPLY_KEYS = ("ok", "action", "bonus", "error", "unavailable")
MISSING_REPLY_S = 600.0
"""Repeatable mode: a reply this late is a client bug (every submitted id comes back once)."""


class AdvisorLink:
    """Sends advisor requests about observations and attaches the answers that come back.

    Args:
        client: a background client of the advisor server(s).
        want_actions: ask ``/v1/advise`` for an action (VMR, AWAG).
        want_clip: ask ``/v1/clip/score`` for a CLIP bonus (needs images in the advice).
        lag_steps: repeatable mode's L (lock-steps from a request to its attachment); ``None``
            for the asynchronous mode.
        probe_interval_s: while the advisor is down, send one request this often.
    """

    def __init__(
        self, client: LabelClient, *, want_actions: bool, want_clip: bool, lag_steps: int | None = None,
        probe_interval_s: float = 2.0,
    ) -> None:
        if lag_steps is not None and lag_steps < 0:
            raise UserError(f"advisor.label_lag_steps: must be >= 0, got {lag_steps}")
        self.client = client
        self.want_actions, self.want_clip = want_actions, want_clip
        self.lag_steps = lag_steps
        self.probe_interval_s = probe_interval_s
        self.stats = LabelStats()
        self.is_up = True
        self._sent_at: dict[str, int] = {}
        self._last_probe = -float("inf")
        self._due: deque[tuple[int, list[str]]] = deque()
        """repeatable mode: (lock-step, ids requested then), oldest first"""
        self._held: dict[str, dict[str, Any]] = {}
        """repeatable mode: replies that arrived before their lock-step is due"""

    @property
    def repeatable(self) -> bool:
        return self.lag_steps is not None

    @property
    def in_flight(self) -> int:
        return len(self._sent_at)

    def submit_lockstep(self, batch: StepBatch, env_step: int, lock_step: int = 0) -> None:
        """One request per valid transition of a lock-step, each about its o_t.

        The payload comes from ``batch.obs_infos`` (the info that came *with* o_t; the reset's
        at t = 0), never from ``batch.infos`` (which came with o_{t+1}: a step late).
        """
        sent: list[str] = []
        for clip in np.flatnonzero(batch.valid):
            advice = advice_of(batch.obs_infos[clip])
            if advice is not None:
                sent += self.submit(batch.step_id(int(clip)), advice, batch.actions[clip], env_step)
        if self.repeatable and sent:
            self._due.append((lock_step, sent))

    def submit(self, step_id: StepId, advice: dict[str, Any], action: np.ndarray, env_step: int) -> list[str]:
        """Ask about o_t (``advice`` came with o_t) and the executed action a_t; the ids sent."""
        if not self.is_up:
            now = time.monotonic()
            if now - self._last_probe < self.probe_interval_s:
                self.stats.skipped += int(self.want_actions) + int(self.want_clip)
                return []
            self._last_probe = now
        image = advice.get("image")
        sent = []
        if self.want_actions:
            payload = advise_payload(image, advice["command"], advice["speed_mps"], advice.get("state"))
            sent.append(self._send(item_id(ADVISE, step_id), payload, "advise", env_step))
        if self.want_clip:
            if image is None:
                raise ValueError("CLIP bonus requests need the RGB BEV: build the env with with_image=True")
            payload = clip_payload(image, advice["command"], advice["speed_mps"], action)
            sent.append(self._send(item_id(CLIP, step_id), payload, "clip", env_step))
        return sent

    def _send(self, identifier: str, payload: dict[str, Any], kind: str, env_step: int) -> str:
        self._sent_at[identifier] = env_step
        self.stats.submitted += 1
        self.client.submit(identifier, payload, kind)
        return identifier

    def collect(self, attach: Attach, env_step: int, lock_step: int = 0) -> int:
        """Attach the answers due now (repeatable) or every answer that arrived (asynchronous).

        Returns:
            How many answers were attached.
        """
        if not self.repeatable:
            return sum(self._apply(identifier, reply, attach, env_step) for identifier, reply in self.client.poll())
        self._hold(self.client.poll())
        attached = 0
        while self._due and self._due[0][0] <= lock_step - int(self.lag_steps or 0):
            _, identifiers = self._due.popleft()
            attached += self._attach_in_order(identifiers, attach, env_step)
        return attached

    def flush(self, attach: Attach, env_step: int) -> int:
        """Attach every answer still expected (PPO, before a rollout is used).

        Repeatable mode waits for each; asynchronous mode takes what arrived.
        """
        if not self.repeatable:
            return self.collect(attach, env_step)
        attached = 0
        while self._due:
            _, identifiers = self._due.popleft()
            attached += self._attach_in_order(identifiers, attach, env_step)
        return attached

    def _attach_in_order(self, identifiers: list[str], attach: Attach, env_step: int) -> int:
        self._wait_for(identifiers)
        return sum(self._apply(identifier, self._held.pop(identifier), attach, env_step) for identifier in identifiers)

    def _hold(self, replies: list[tuple[str, dict[str, Any]]]) -> None:
        for identifier, reply in replies:
            if identifier in self._sent_at:  # what attaching needs, not the server's timings
                self._held[identifier] = {key: reply[key] for key in REPLY_KEYS if key in reply}

    def _wait_for(self, identifiers: list[str]) -> None:
        """Block until every one of ``identifiers`` has its reply held (the client answers each)."""
        deadline = time.monotonic() + MISSING_REPLY_S
        while any(identifier not in self._held for identifier in identifiers):
            if time.monotonic() > deadline:
                missing = [i for i in identifiers if i not in self._held]
                raise RuntimeError(f"advisor client lost replies for {missing[:3]} (and {len(missing)} in all)")
            self._hold(self.client.poll(wait_s=0.5))

    def _apply(self, identifier: str, reply: dict[str, Any], attach: Attach, env_step: int) -> int:
        """One reply onto its entry; 1 if attached."""
        sent_at = self._sent_at.pop(identifier, env_step)
        if not reply.get("ok"):
            self._failed(reply)
            return 0
        self._mark_up()
        kind, step_id = parse_item_id(identifier)
        action = np.asarray(reply["action"], np.float32) if kind == ADVISE else None
        bonus = float(reply["bonus"]) if kind == CLIP else None
        if not attach(step_id, action, bonus):
            self.stats.dropped += 1
            return 0
        self.stats.attached += 1
        self.stats.latencies.append(env_step - sent_at)
        self.stats.latency_total += env_step - sent_at
        return 1

    def _failed(self, reply: dict[str, Any]) -> None:
        if reply.get("unavailable"):
            if self.is_up:
                log.warning("advisor unreachable (%s); training continues without labels", reply.get("error"))
                self.is_up = False
                self._last_probe = time.monotonic()
            self.stats.skipped += 1
            return
        self.stats.failed += 1
        if self.stats.failed == 1:
            log.warning("advisor could not answer an item: %s (further errors are only counted)", reply.get("error"))

    def _mark_up(self) -> None:
        if not self.is_up:
            log.warning("advisor is answering again; labels resume")
            self.is_up = True

    # ------------------------------------------------------------------ resume
    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint needs to continue exactly: in repeatable mode every answer still due
        (waited for now, attached later at its own lock-step) and the counters."""
        state: dict[str, Any] = {"stats": self.stats.state_dict(), "repeatable": self.repeatable}
        if self.repeatable:
            for _, identifiers in self._due:
                self._wait_for(identifiers)
            state.update(due=[[step, list(ids)] for step, ids in self._due], held=dict(self._held),
                         sent_at=dict(self._sent_at))
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stats.load_state_dict(state["stats"])
        if self.repeatable and state.get("repeatable"):
            self._due = deque((int(step), list(ids)) for step, ids in state["due"])
            self._held = dict(state["held"])
            self._sent_at = {key: int(value) for key, value in state["sent_at"].items()}

    def close(self) -> None:
        self.client.close()

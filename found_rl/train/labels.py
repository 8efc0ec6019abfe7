"""The label path: advisor requests about o_t out, answers onto the storage entry of o_t.

Requests leave without blocking the loop (:class:`vlm_server.client.BackgroundClient`); each
lock-step the answers that arrived are attached by step id (ARCHITECTURE §6). An answer whose
entry was overwritten meanwhile is dropped and counted. When no replica answers, training goes
on without labels: the link says so once, sends only an occasional probe, and resumes as soon
as a probe is answered.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from fast_sampler import StepBatch, StepId
from found_rl.train.envs import advice_of
from vlm_server.client import advise_payload, clip_payload

log = logging.getLogger(__name__)

ADVISE, CLIP = "a", "c"

Attach = Callable[[StepId, np.ndarray | None, float | None], bool]
"""Attaches an advisor action and/or CLIP bonus to the entry of a step id; False if it is gone."""


class LabelClient(Protocol):
    """What the link needs of :class:`~vlm_server.client.BackgroundClient`."""

    def submit(self, item_id: str, payload: dict[str, Any], kind: str = "advise") -> None: ...

    def poll(self) -> list[tuple[str, dict[str, Any]]]: ...

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


class AdvisorLink:
    """Sends advisor requests about observations and attaches the answers that come back.

    Args:
        client: a background client of the advisor server(s).
        want_actions: ask ``/v1/advise`` for an action (VMR, AWAG).
        want_clip: ask ``/v1/clip/score`` for a CLIP bonus (needs images in the advice).
        probe_interval_s: while the advisor is down, send one request this often.
    """

    def __init__(
        self, client: LabelClient, *, want_actions: bool, want_clip: bool, probe_interval_s: float = 2.0
    ) -> None:
        self.client = client
        self.want_actions, self.want_clip = want_actions, want_clip
        self.probe_interval_s = probe_interval_s
        self.stats = LabelStats()
        self.is_up = True
        self._sent_at: dict[str, int] = {}
        self._last_probe = -float("inf")

    @property
    def in_flight(self) -> int:
        return len(self._sent_at)

    def submit_lockstep(self, batch: StepBatch, env_step: int) -> None:
        """One request per valid transition of a lock-step, each about its o_t.

        The payload comes from ``batch.obs_infos`` (the info that came *with* o_t; the reset's
        at t = 0), never from ``batch.infos`` (which came with o_{t+1}: a step late).
        """
        for clip in np.flatnonzero(batch.valid):
            advice = advice_of(batch.obs_infos[clip])
            if advice is not None:
                self.submit(batch.step_id(int(clip)), advice, batch.actions[clip], env_step)

    def submit(self, step_id: StepId, advice: dict[str, Any], action: np.ndarray, env_step: int) -> None:
        """Ask about o_t (``advice`` came with o_t) and the executed action a_t."""
        if not self.is_up:
            now = time.monotonic()
            if now - self._last_probe < self.probe_interval_s:
                self.stats.skipped += int(self.want_actions) + int(self.want_clip)
                return
            self._last_probe = now
        image = advice.get("image")
        if self.want_actions:
            payload = advise_payload(image, advice["command"], advice["speed_mps"], advice.get("state"))
            self._send(item_id(ADVISE, step_id), payload, "advise", env_step)
        if self.want_clip:
            if image is None:
                raise ValueError("CLIP bonus requests need the RGB BEV: build the env with with_image=True")
            payload = clip_payload(image, advice["command"], advice["speed_mps"], action)
            self._send(item_id(CLIP, step_id), payload, "clip", env_step)

    def _send(self, identifier: str, payload: dict[str, Any], kind: str, env_step: int) -> None:
        self._sent_at[identifier] = env_step
        self.stats.submitted += 1
        self.client.submit(identifier, payload, kind)

    def collect(self, attach: Attach, env_step: int) -> int:
        """Attach every answer that arrived; returns how many were attached."""
        attached = 0
        for identifier, reply in self.client.poll():
            sent_at = self._sent_at.pop(identifier, env_step)
            if not reply.get("ok"):
                self._failed(reply)
                continue
            self._mark_up()
            kind, step_id = parse_item_id(identifier)
            action = np.asarray(reply["action"], np.float32) if kind == ADVISE else None
            bonus = float(reply["bonus"]) if kind == CLIP else None
            if attach(step_id, action, bonus):
                attached += 1
                self.stats.attached += 1
                self.stats.latencies.append(env_step - sent_at)
                self.stats.latency_total += env_step - sent_at
            else:
                self.stats.dropped += 1
        return attached

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

    def close(self) -> None:
        self.client.close()

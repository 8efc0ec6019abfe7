"""The label path: advisor requests about o_t out, answers onto the storage entry of o_t.

Requests leave without blocking the loop (:class:`vlm_server.client.BackgroundClient`) and
answers are attached by step id (ARCHITECTURE §6). Only a budgeted subset of observations is
asked about (:mod:`label_budget`: a pure function of the step id and ``rate``), so a teacher
slower than the loop labels what it can without setting the loop's pace. Two modes:

* **repeatable** (``lag_steps=L``): the answers to the requests of lock-step k are attached
  when lock-step k + L is stored, in request order; the loop waits only for an answer that is
  later than that (the advisor fell behind its budget). Which transitions carry a label at each
  update then depends on the seed alone, so a seed gives the same run, and a checkpoint carries
  the answers still due. An advisor that stops answering is retried for ``down_wait_s``; then
  the run either stops (:class:`~found_rl.errors.OutsideFailure`) or goes on marked not
  repeatable from that lock-step (``when_down``).
* **asynchronous** (``lag_steps=None``): each lock-step attaches whatever arrived (never waits).

A busy advisor (it answers 429/503: alive, pushing back) is not a down one: the client slows
its pace and retries. An answer whose entry was overwritten meanwhile is dropped and counted.
When no replica answers in asynchronous mode (or after a repeatable run was marked), training
goes on without labels: the link says so once, sends only an occasional probe, and resumes as
soon as a probe is answered.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from fast_sampler import StepBatch, StepId
from found_rl.errors import OutsideFailure, UserError, as_user_error
from found_rl.train.envs import advice_of
from found_rl.train.label_budget import (
    check_rate,
    is_labelled,
    lag_for,
    probe_answers_per_s,
    rate_at_own_batch,
    request_sizes,
)
from vlm_server.client import advise_payload, clip_payload

log = logging.getLogger(__name__)

ADVISE, CLIP = "a", "c"

Attach = Callable[[StepId, np.ndarray | None, float | None], bool]
"""Attaches an advisor action and/or CLIP bonus to the entry of a step id; False if it is gone."""


class LabelClient(Protocol):
    """What the link needs of :class:`~vlm_server.client.BackgroundClient`."""

    def submit(self, item_id: str, payload: dict[str, Any], kind: str = "advise") -> None: ...

    def submit_many(self, items: list[tuple[str, dict[str, Any], str]]) -> None: ...

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
    busy: int = 0
    """requests the advisor was too busy to answer within the client's patience"""
    marked_down: int = 0
    """times the advisor was taken for down (it gave no answer at all)"""
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


REPLY_KEYS = ("ok", "action", "bonus", "error", "unavailable", "busy")
MISSING_REPLY_S = 600.0
"""Repeatable mode: a reply this late is a client bug (every submitted id comes back once)."""
RETRY_PAUSE_S = 0.5
"""Repeatable mode: pause before asking a down advisor again"""

PROBE_ITEMS = 32
"""Items the ``label_rate: auto`` probe times at each request size."""



@dataclass(frozen=True)
class ChosenBudget:
    """The label budget an ``auto`` rate or lag resolved to at the first lock-step."""

    rate: float
    lag_steps: int | None
    """the label lag (``None``: asynchronous mode)"""
    answers_per_s: float | None = None
    """the probe's answers/s at the request size the rate makes (``None``: the rate was given)"""
    answers_per_s_by_request_size: dict[int, float] = field(default_factory=dict)


BudgetChosen = Callable[[ChosenBudget], None]
"""Told the resolved budget once, so the run config records numbers and a resume repeats them."""


def _unanswered(reply: dict[str, Any]) -> bool:
    """The advisor gave no answer for the item: down, or busy past the client's patience."""
    return bool(reply.get("unavailable") or reply.get("busy"))


class AdvisorLink:
    """Sends advisor requests about observations and attaches the answers that come back.

    Args:
        client: a background client of the advisor server(s).
        want_actions: ask ``/v1/advise`` for an action (VMR, AWAG).
        want_clip: ask ``/v1/clip/score`` for a CLIP bonus (needs images in the advice).
        lag_steps: repeatable mode's L (lock-steps from a request to its attachment); ``"auto"``
            chooses it with the rate at the first lock-step
            (:func:`~found_rl.train.label_budget.lag_for`: long enough for full requests);
            ``None`` for the asynchronous mode.
        rate: the label budget, the share of observations asked about (``label_budget``);
            ``None`` probes the advisor at the first lock-step and chooses it
            (:func:`~found_rl.train.label_budget.rate_at_own_batch`).
        auto_rate_steps_per_s: ``rate=None``: the loop speed the rate is chosen for.
        on_budget_chosen: told the rate and lag once ``rate=None`` or ``lag_steps="auto"`` were
            resolved, to record them in the run config.
        down_wait_s: repeatable mode: how long an advisor that does not answer is retried.
        stop_when_down: repeatable mode: after ``down_wait_s``, stop the run
            (:class:`OutsideFailure`) instead of going on marked not repeatable.
        advisor_name: names the advisor in messages (its URLs).
        check_interrupt: called while the link waits, so a stop request ends a long wait at a
            point where nothing is half done.
        probe_interval_s: while the advisor is down, send one request this often.
        request_items: requests leave in batches of at least this many items, or once the
            oldest waiting one is half the label lag old (repeatable) or a lock-step old: a
            served model answers a batch of 16 for about the price of one, and each HTTP request
            costs the loop's own process time.
        cpu_share: ``rate=None``: the share of a core the advisor may take (its answers per
            second at the loop's request size, times this, over the loop's env steps/s).
        advisor_cpu_seconds: ``rate=None``: the CPU time the advisor process has used, for a
            server the run spawned: the probe then counts answers per CPU second, what the
            advisor takes from the loop; otherwise (a remote server) per wall-clock second.
    """

    def __init__(
        self, client: LabelClient, *, want_actions: bool, want_clip: bool,
        lag_steps: int | Literal["auto"] | None = None, rate: float | None = 1.0,
        auto_rate_steps_per_s: float = 100.0, on_budget_chosen: BudgetChosen | None = None,
        down_wait_s: float = 60.0, stop_when_down: bool = False, advisor_name: str = "the advisor",
        check_interrupt: Callable[[], None] | None = None, probe_interval_s: float = 2.0,
        request_items: int = 1, cpu_share: float = 0.15, advisor_cpu_seconds: Callable[[], float] | None = None,
    ) -> None:
        if isinstance(lag_steps, int) and lag_steps < 0:
            raise UserError(f"advisor.label_lag_steps: must be >= 0, got {lag_steps}")
        if rate is not None:
            with as_user_error():
                rate = check_rate(rate)
        self.client = client
        self.advisor_cpu_seconds = advisor_cpu_seconds
        self.want_actions, self.want_clip = want_actions, want_clip
        self.lag_steps: int | Literal["auto"] | None = lag_steps
        self.rate = rate
        self.auto_rate_steps_per_s = auto_rate_steps_per_s
        self.on_budget_chosen = on_budget_chosen
        self.down_wait_s = down_wait_s
        self.stop_when_down = stop_when_down
        self.advisor_name = advisor_name
        self.check_interrupt = check_interrupt or (lambda: None)
        self.probe_interval_s = probe_interval_s
        if request_items < 1:
            raise UserError(f"advisor.request_items: must be >= 1, got {request_items}")
        self.request_items = request_items
        self.cpu_share = cpu_share
        self._outbox: list[tuple[str, dict[str, Any], str]] = []
        self._outbox_since: int | None = None
        """the lock-step of the oldest request waiting in the outbox"""
        self.stats = LabelStats()
        self.is_up = True
        self.not_repeatable_from: int | None = None
        """the lock-step from which a repeatable run stopped repeating (its advisor went down)"""
        self._sent_at: dict[str, int] = {}
        self._requests: dict[str, tuple[dict[str, Any], str]] = {}
        """repeatable mode: each request in flight, to ask again if the advisor was down"""
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

    def summary(self) -> dict[str, Any]:
        """The label path of the run so far: its budget, how much of it was labelled, its health."""
        # Budgeted items that are no longer in flight: sent and settled, or never sent (skipped
        # while the advisor was down); an advisor that was down does not look well covered.
        settled = self.stats.submitted - self.in_flight + self.stats.skipped
        return {
            "label_rate": self.rate,
            "label_lag_steps": self.lag_steps,
            "budget_coverage": self.stats.attached / settled if settled else 0.0,
            "marked_down": self.stats.marked_down,
            "repeatable": self.repeatable and self.not_repeatable_from is None,
            "not_repeatable_from": self.not_repeatable_from,
            **{key: getattr(self.stats, key) for key in ("submitted", "attached", "dropped", "failed", "skipped",
                                                          "busy")},
        }

    def submit_lockstep(self, batch: StepBatch, env_step: int, lock_step: int = 0) -> None:
        """One request per valid transition of a lock-step in the label budget, each about its o_t.

        The payload comes from ``batch.obs_infos`` (the info that came *with* o_t; the reset's
        at t = 0), never from ``batch.infos`` (which came with o_{t+1}: a step late).
        """
        clips = np.flatnonzero(batch.valid)
        if (self.rate is None or self.lag_steps == "auto") and clips.size:
            self._choose_budget(batch, clips)
        asked = is_labelled(batch.clip_index[clips], batch.episode_index[clips], batch.step_index[clips],
                            self.rate or 1.0)
        sent: list[str] = []
        for clip in clips[asked]:
            advice = advice_of(batch.obs_infos[clip])
            if advice is not None:
                sent += self.submit(batch.step_id(int(clip)), advice, batch.actions[clip], env_step)
        if self.repeatable and sent:
            self._due.append((lock_step, sent))
        if sent and self._outbox_since is None:
            self._outbox_since = lock_step
        if len(self._outbox) >= self.request_items or (
                self._outbox_since is not None and lock_step - self._outbox_since >= self._flush_age):
            self._send_outbox()

    @property
    def _flush_age(self) -> int:
        """Lock-steps a request may wait in the outbox: half the label lag, at least one."""
        return self._flush_age_of(self.lag_steps)

    @staticmethod
    def _flush_age_of(lag_steps: int | Literal["auto"] | None) -> int:
        return max(1, lag_steps // 2) if isinstance(lag_steps, int) else 1

    def _send_outbox(self) -> None:
        if self._outbox:
            self.client.submit_many(self._outbox)
        self._outbox, self._outbox_since = [], None

    def _choose_budget(self, batch: StepBatch, clips: np.ndarray) -> None:
        """Resolve ``rate=None`` (a probe of the advisor's answers/s on this lock-step's requests)
        and ``lag_steps="auto"`` (long enough for full requests at that rate), once."""
        payloads = []
        for clip in clips:
            advice = advice_of(batch.obs_infos[clip])
            if advice is not None:
                payloads += self._payloads(advice, batch.actions[clip])
        if not payloads:
            return
        per_observation = len(payloads) / len(clips)  # an action and/or a bonus
        items_at_rate_one = len(clips) * per_observation

        def lag_at(rate: float) -> int | None:
            if self.lag_steps == "auto":
                return lag_for(rate, items_at_rate_one, self.request_items)
            return self.lag_steps

        def items_per_request(rate: float) -> float:
            """What the outbox holds when it leaves: one flush age of budgeted observations."""
            return min(self.request_items, items_at_rate_one * rate * self._flush_age_of(lag_at(rate)))

        answers_per_s, measured = None, {}
        if self.rate is None:
            # Largest first: the server's warm-up falls in the first, untimed request of the
            # largest size; then at least PROBE_ITEMS items per size, so single items are timed too.
            clock = self.advisor_cpu_seconds or time.perf_counter
            measured = {size: probe_answers_per_s(self.client, payloads, items=size, clock=clock,
                                                  rounds=1 + max(2, math.ceil(PROBE_ITEMS / size)))
                        for size in reversed(request_sizes(self.request_items))}
            self.rate, items, answers_per_s = rate_at_own_batch(
                measured, self.auto_rate_steps_per_s * per_observation, items_per_request, cpu_share=self.cpu_share)
            log.info("advisor answers %.0f requests per %s second at %.1f per request: label rate %.2g for a loop "
                     "of %.0f env steps/s", answers_per_s, "CPU" if self.advisor_cpu_seconds else "wall-clock",
                     items, self.rate, self.auto_rate_steps_per_s)
        if self.lag_steps == "auto":
            self.lag_steps = lag_at(self.rate)
            log.info("label lag %d lock-steps: requests of up to %.0f items at label rate %.2g",
                     self.lag_steps, items_per_request(self.rate), self.rate)
        if self.on_budget_chosen is not None:
            self.on_budget_chosen(ChosenBudget(self.rate, self.lag_steps, answers_per_s, measured))

    def submit(self, step_id: StepId, advice: dict[str, Any], action: np.ndarray, env_step: int) -> list[str]:
        """Ask about o_t (``advice`` came with o_t) and the executed action a_t; the ids sent."""
        if not self.is_up:
            now = time.monotonic()
            if now - self._last_probe < self.probe_interval_s:
                self.stats.skipped += int(self.want_actions) + int(self.want_clip)
                return []
            self._last_probe = now
        return [
            self._send(item_id(ADVISE if kind == "advise" else CLIP, step_id), payload, kind, env_step)
            for payload, kind in self._payloads(advice, action)
        ]

    def _payloads(self, advice: dict[str, Any], action: np.ndarray) -> list[tuple[dict[str, Any], str]]:
        """The requests about one observation: ``(payload, kind)`` for an action and/or a bonus."""
        image = advice.get("image")
        payloads = []
        if self.want_actions:
            payloads.append((advise_payload(image, advice["command"], advice["speed_mps"], advice.get("state")),
                             "advise"))
        if self.want_clip:
            if image is None:
                raise ValueError("CLIP bonus requests need the RGB BEV: build the env with with_image=True")
            payloads.append((clip_payload(image, advice["command"], advice["speed_mps"], action), "clip"))
        return payloads

    def _send(self, identifier: str, payload: dict[str, Any], kind: str, env_step: int) -> str:
        self._sent_at[identifier] = env_step
        if self.repeatable:
            self._requests[identifier] = (payload, kind)
        self.stats.submitted += 1
        self._outbox.append((identifier, payload, kind))
        if self.request_items == 1:
            self._send_outbox()
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
            attached += self._attach_oldest(attach, env_step)
        return attached

    def flush(self, attach: Attach, env_step: int) -> int:
        """Attach every answer still expected (PPO, before a rollout is used).

        Repeatable mode waits for each; asynchronous mode takes what arrived.
        """
        self._send_outbox()
        if not self.repeatable:
            return self.collect(attach, env_step)
        attached = 0
        while self._due:
            attached += self._attach_oldest(attach, env_step)
        return attached

    def _attach_oldest(self, attach: Attach, env_step: int) -> int:
        """The oldest due lock-step's answers, in request order. It leaves the queue only once
        they are attached, so a stop request during the wait loses nothing (the checkpoint keeps it)."""
        lock_step, identifiers = self._due[0]
        self._settle(identifiers, lock_step)
        attached = sum(self._apply(identifier, self._held.pop(identifier), attach, env_step)
                       for identifier in identifiers)
        self._due.popleft()
        return attached

    def _hold(self, replies: list[tuple[str, dict[str, Any]]]) -> None:
        for identifier, reply in replies:
            if identifier in self._sent_at:  # what attaching needs, not the server's timings
                self._held[identifier] = {key: reply[key] for key in REPLY_KEYS if key in reply}

    def _settle(self, identifiers: list[str], lock_step: int) -> None:
        """Block until each of ``identifiers`` has a reply to apply (repeatable mode).

        A reply saying the advisor did not answer is asked again, for ``down_wait_s``; then the
        run stops or is marked not repeatable (``stop_when_down``).
        """
        waited_for = set(identifiers)
        if any(identifier in waited_for for identifier, _, _ in self._outbox):  # a lag shorter than 2
            self._send_outbox()
        deadline = time.monotonic() + MISSING_REPLY_S
        down_since: float | None = None
        while True:
            missing = [i for i in identifiers if i not in self._held]
            unanswered = [i for i in identifiers if i in self._held and _unanswered(self._held[i])]
            if unanswered and self.not_repeatable_from is None:
                down_since = down_since if down_since is not None else time.monotonic()
                if time.monotonic() - down_since > self.down_wait_s:
                    self._went_down(lock_step, self._held[unanswered[0]])
                else:
                    self._ask_again(unanswered, lock_step)
                    missing += unanswered
            if not missing:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"advisor client lost replies for {missing[:3]} (and {len(missing)} in all)")
            self.check_interrupt()
            self._hold(self.client.poll(wait_s=0.5))

    def _ask_again(self, identifiers: list[str], lock_step: int) -> None:
        if self.is_up:
            log.warning("%s does not answer (lock-step %d); asking again for up to %.0f s (advisor.down_wait_s)",
                        self.advisor_name, lock_step, self.down_wait_s)
            self.is_up = False
            self.stats.marked_down += 1
        time.sleep(RETRY_PAUSE_S)
        for identifier in identifiers:
            del self._held[identifier]
            payload, kind = self._requests[identifier]
            self.client.submit(identifier, payload, kind)

    def _went_down(self, lock_step: int, reply: dict[str, Any]) -> None:
        """The advisor stayed down for ``down_wait_s``: stop, or go on marked not repeatable."""
        message = (f"{self.advisor_name} gave no answer for {self.down_wait_s:.0f} s (advisor.down_wait_s) "
                   f"at lock-step {lock_step}: {reply.get('error')}")
        if self.stop_when_down:
            raise OutsideFailure(f"{message}; the last checkpoint resumes the run (advisor.when_down: stop)")
        self.not_repeatable_from = lock_step
        log.warning("%s; training goes on without its labels, and the run no longer repeats from lock-step %d "
                    "(advisor.when_down: continue)", message, lock_step)

    def _apply(self, identifier: str, reply: dict[str, Any], attach: Attach, env_step: int) -> int:
        """One reply onto its entry; 1 if attached."""
        sent_at = self._sent_at.pop(identifier, env_step)
        self._requests.pop(identifier, None)
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
        if reply.get("busy"):  # alive but overloaded past the client's patience: not down
            self.stats.busy += 1
            return
        if reply.get("unavailable"):
            if self.is_up:
                log.warning("advisor unreachable (%s); training continues without labels", reply.get("error"))
                self.is_up = False
                self.stats.marked_down += 1
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
        state: dict[str, Any] = {"stats": self.stats.state_dict(), "repeatable": self.repeatable,
                                 "not_repeatable_from": self.not_repeatable_from}
        if self.repeatable:
            for lock_step, identifiers in self._due:
                self._settle(identifiers, lock_step)
            state.update(due=[[step, list(ids)] for step, ids in self._due], held=dict(self._held),
                         sent_at=dict(self._sent_at))
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stats.load_state_dict(state["stats"])
        self.not_repeatable_from = state.get("not_repeatable_from")
        if self.repeatable and state.get("repeatable"):
            self._due = deque((int(step), list(ids)) for step, ids in state["due"])
            self._held = dict(state["held"])
            self._sent_at = {key: int(value) for key, value in state["sent_at"].items()}

    def close(self) -> None:
        self.client.close()

"""The label path end to end: FAST sampler → requests about o_t → a real server on loopback →
answers attached to o_t's replay entry, late answers to overwritten entries dropped.

The env is a counter whose info changes every step, so a label built from the wrong step's
info (the published code's off-by-one) or attached to the wrong entry cannot pass. The server
is a real ``found-rl serve`` child answering ``(speed / 100, command / 10)`` after a delay.
"""

import functools
import time

import gymnasium as gym
import numpy as np
import pytest

from fast_sampler import FastSampler, InProcessExecutor
from found_rl.models.observation import ObsSpec
from found_rl.storage.replay import ReplayBuffer
from found_rl.train.envs import ADVICE_KEY
from found_rl.train.labels import AdvisorLink, item_id, parse_item_id
from found_rl.train.server import SpawnedServer, free_loopback_port
from vlm_server.backends.fixed_cost import expected_action
from vlm_server.client import BackgroundClient


def command_at(t: int) -> int:
    return 1 + t % 6


def speed_at(t: int) -> float:
    return 0.5 * t


class CounterEnv(gym.Env):
    """o_t = [t]; the info that comes with o_t carries the command and speed of step t."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def __init__(self, length: int = 40) -> None:
        self.length = length
        self.t = 0

    def _info(self) -> dict:
        advice = {"command": command_at(self.t), "speed_mps": speed_at(self.t)}
        return {"command": advice["command"], "speed_mps": advice["speed_mps"], ADVICE_KEY: advice}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.t], np.float32), self._info()

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 0.0, self.t >= self.length, False, self._info()


@pytest.fixture
def echo_server(tmp_path):
    """A real advisor server answering ``expected_action(command, speed)`` 30 ms after a batch."""
    server = SpawnedServer(
        "fixed-cost", {"base_ms": 30.0, "per_item_ms": 0.0, "error_id_prefix": "a:1."},
        log_path=tmp_path / "server.log", ready_timeout_s=60.0,
    )
    with server:
        yield server


def run_loop(
    server_url: str, capacity: int, lock_steps: int, lag_steps: int | None = None, on_lockstep=None
) -> tuple[ReplayBuffer, AdvisorLink]:
    sampler = FastSampler(InProcessExecutor([CounterEnv, CounterEnv]), lambda obs: np.zeros((2, 2), np.float32),
                          rho=1.0, horizon=1000, seed=0)
    replay = ReplayBuffer(capacity, ObsSpec(vector_dim=1), 2, num_envs=2)
    link = AdvisorLink(BackgroundClient(server_url, timeout_s=5.0), want_actions=True, want_clip=False,
                       lag_steps=lag_steps)

    def attach(step_id, action, bonus):
        return replay.attach_labels(tuple(step_id), action=action, clip_bonus=bonus)

    env_steps = 0
    with sampler:
        for lock_step in range(1, lock_steps + 1):
            batch = sampler.step()
            step_ids = np.stack([batch.clip_index, batch.episode_index, batch.step_index], axis=1)
            replay.add(batch.obs, batch.actions, batch.rewards, batch.next_obs, batch.terminated,
                       batch.truncated, step_ids=step_ids, valid=batch.valid)
            env_steps += int(batch.valid.sum())
            link.submit_lockstep(batch, env_steps, lock_step)
            link.collect(attach, env_steps, lock_step)
            if on_lockstep is not None:
                on_lockstep(lock_step, replay)
            time.sleep(0.005)  # answers take 30 ms: several lock-steps late
        # late answers land now in asynchronous mode; in repeatable mode an answer lands only at its
        # own lock-step, so the last lag_steps' answers never do (waiting for them idled 10 s)
        deadline = time.monotonic() + (10.0 if lag_steps is None else 0.0)
        while link.in_flight and time.monotonic() < deadline:
            link.collect(attach, env_steps)
            time.sleep(0.02)
    link.close()
    return replay, link


def test_late_answers_land_on_the_entry_of_o_t_with_the_command_and_speed_of_t(echo_server):
    replay, link = run_loop(echo_server.url, capacity=400, lock_steps=60)
    stats = link.stats
    assert link.in_flight == 0 and stats.submitted == 120
    # clip 1's items are answered with an error by the server: counted, not attached, not fatal
    assert stats.failed == 60 and stats.attached == 60 and stats.dropped == 0
    assert max(stats.latencies) >= 2  # the answers really were late
    labelled = np.flatnonzero(replay.has_advisor)
    assert len(labelled) == 60 and set(replay.step_ids[labelled, 0]) == {0}
    for slot in labelled:
        t = int(replay.step_ids[slot, 2])
        assert replay._obs["obs"][slot, 0] == t  # the entry holds o_t ...
        expected = expected_action(command_at(t), speed_at(t))  # ... and the answer is about step t
        np.testing.assert_allclose(replay.advisor_actions[slot], expected, rtol=1e-6)


def test_an_answer_whose_entry_was_overwritten_is_dropped_and_leaves_no_stale_label(echo_server):
    replay, link = run_loop(echo_server.url, capacity=16, lock_steps=60)
    assert link.stats.dropped > 0 and link.stats.attached + link.stats.dropped + link.stats.failed == 120
    for slot in np.flatnonzero(replay.has_advisor):
        t = int(replay.step_ids[slot, 2])
        assert replay._obs["obs"][slot, 0] == t
        np.testing.assert_allclose(replay.advisor_actions[slot], expected_action(command_at(t), speed_at(t)), rtol=1e-6)


def test_a_down_advisor_is_reported_once_skipped_and_picked_up_again(tmp_path, caplog):
    port = free_loopback_port()
    link = AdvisorLink(BackgroundClient(f"http://127.0.0.1:{port}", timeout_s=0.5, max_retries=0),
                       want_actions=True, want_clip=False, probe_interval_s=0.2)
    advice = {"command": 4, "speed_mps": 1.0}
    attached = []

    def attach(step_id, action, bonus):
        attached.append(step_id)
        return True

    def pump(seconds: float, until) -> None:
        deadline = time.monotonic() + seconds
        step = 0
        while time.monotonic() < deadline and not until():
            link.submit((0, 0, step), advice, np.zeros(2), step)
            link.collect(attach, step)
            step += 1
            time.sleep(0.02)

    try:
        with caplog.at_level("WARNING"):
            pump(10.0, lambda: not link.is_up)
            assert not link.is_up
            pump(1.0, lambda: False)
        assert link.stats.skipped > 0
        assert sum("unreachable" in r.message for r in caplog.records) == 1  # said once, not per request
        assert link.summary()["budget_coverage"] == 0.0  # skipped while down: budgeted, never labelled
        with SpawnedServer("fixed-cost", {"base_ms": 1.0}, log_path=tmp_path / "s.log", port=port):
            pump(20.0, lambda: link.is_up and attached)
        assert link.is_up and attached
    finally:
        link.close()


@pytest.mark.parametrize("lag", [0, 3])
def test_repeatable_mode_attaches_each_answer_exactly_lag_lock_steps_after_its_request(echo_server, lag):
    """The server answers 30 ms late, several lock-steps; the schedule must not care."""
    seen = []

    def check(lock_step, replay):
        transitions = replay.is_transition
        stored = replay.step_ids[transitions]
        labelled = replay.has_advisor[transitions]
        clip0 = stored[:, 0] == 0  # clip 1's items are refused by the server: never labelled
        due = stored[:, 2] + 1 <= lock_step - lag  # step t was stored at lock-step t + 1
        np.testing.assert_array_equal(labelled[clip0], due[clip0])
        assert not labelled[~clip0].any()
        seen.append(lock_step)

    _, link = run_loop(echo_server.url, capacity=400, lock_steps=30, lag_steps=lag, on_lockstep=check)
    assert seen == list(range(1, 31))
    assert link.stats.attached == 30 - lag and link.stats.failed == 30 - lag


class ScriptedClient:
    """Answers every item after a random number of polls: arrival order is noise, by design."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.queue: list[list] = []

    def submit(self, item_id, payload, kind="advise"):
        self.queue.append([int(self.rng.integers(0, 4)), item_id, {"ok": True, "action": [payload["speed_mps"], 0.0]}])

    def submit_many(self, items):
        for item in items:
            self.submit(*item)

    def poll(self, wait_s=0.0):
        for item in self.queue:
            item[0] -= 1
        ready = [(i, r) for n, i, r in self.queue if n < 0]
        self.queue = [item for item in self.queue if item[0] >= 0]
        return ready

    def close(self):
        pass


def attachment_log(seed: int, lag: int, stop_at: int | None = None, state=None):
    """(lock-step, step id) of every attachment over 20 lock-steps of one clip."""
    link = AdvisorLink(ScriptedClient(seed), want_actions=True, want_clip=False, lag_steps=lag)
    if state is not None:
        link.load_state_dict(state)
    log = []
    first = 1 if state is None else stop_at + 1
    for lock_step in range(first, 21):
        for step_id in [(0, 0, lock_step)] if state is None or lock_step > stop_at else []:
            link.submit(step_id, {"command": 4, "speed_mps": float(lock_step)}, np.zeros(2), lock_step)
            link._due.append((lock_step, [item_id("a", step_id)]))
        link.collect(lambda sid, a, b, ls=lock_step: log.append((ls, tuple(sid), float(a[0]))) or True,
                     lock_step, lock_step)
        if stop_at == lock_step and state is None:
            return log, link.state_dict()
    return log, None


def test_the_repeatable_schedule_ignores_arrival_order_and_survives_a_checkpoint():
    a, _ = attachment_log(seed=0, lag=2)
    b, _ = attachment_log(seed=1, lag=2)
    assert a == b == [(t + 2, (0, 0, t), float(t)) for t in range(1, 19)]
    head, state = attachment_log(seed=2, lag=2, stop_at=9)
    tail, _ = attachment_log(seed=3, lag=2, stop_at=9, state=state)
    assert head + tail == a


def test_a_negative_label_lag_is_refused():
    with pytest.raises(ValueError, match="label_lag_steps"):
        AdvisorLink(ScriptedClient(0), want_actions=True, want_clip=False, lag_steps=-1)


def test_item_ids_round_trip():
    assert parse_item_id(item_id("a", (3, 12, 450))) == ("a", (3, 12, 450))


class FlakyClient(ScriptedClient):
    """Answers ``unavailable`` (no replica answered) to the first ``down_for`` sends of each item,
    or to every send when ``down_for`` is None; then like :class:`ScriptedClient`."""

    def __init__(self, seed: int, down_for: int | None) -> None:
        super().__init__(seed)
        self.down_for = down_for
        self.sends: dict[str, int] = {}

    def submit(self, item_id, payload, kind="advise"):
        self.sends[item_id] = self.sends.get(item_id, 0) + 1
        if self.down_for is None or self.sends[item_id] <= self.down_for:
            self.queue.append([0, item_id, {"ok": False, "error": "connection refused", "unavailable": True}])
        else:
            super().submit(item_id, payload, kind)


def drive(link, lock_steps: int = 12) -> list:
    """Submit one item per lock-step through ``submit`` and collect; the attachments made."""
    log = []
    for lock_step in range(1, lock_steps + 1):
        step_id = (0, 0, lock_step)
        sent = link.submit(step_id, {"command": 4, "speed_mps": float(lock_step)}, np.zeros(2), lock_step)
        link._due.append((lock_step, sent))
        link.collect(lambda sid, a, b, ls=lock_step: log.append((ls, tuple(sid))) or True, lock_step, lock_step)
    return log


def test_a_repeatable_run_asks_a_briefly_down_advisor_again_and_stays_repeatable(monkeypatch):
    monkeypatch.setattr("found_rl.train.labels.RETRY_PAUSE_S", 0.0)
    steady = drive(AdvisorLink(ScriptedClient(0), want_actions=True, want_clip=False, lag_steps=2))
    link = AdvisorLink(FlakyClient(1, down_for=2), want_actions=True, want_clip=False, lag_steps=2, down_wait_s=30)
    assert drive(link) == steady
    assert link.not_repeatable_from is None and link.stats.skipped == 0


def test_a_repeatable_run_whose_advisor_stays_down_stops_naming_the_advisor_and_lock_step(monkeypatch):
    from found_rl.errors import OutsideFailure

    monkeypatch.setattr("found_rl.train.labels.RETRY_PAUSE_S", 0.0)
    link = AdvisorLink(FlakyClient(0, down_for=None), want_actions=True, want_clip=False, lag_steps=2,
                       down_wait_s=0.2, stop_when_down=True, advisor_name="the advisor at http://x")
    with pytest.raises(OutsideFailure, match=r"http://x.*lock-step 1\b.*when_down"):
        drive(link)


def test_or_goes_on_marked_not_repeatable_from_that_lock_step(monkeypatch):
    monkeypatch.setattr("found_rl.train.labels.RETRY_PAUSE_S", 0.0)
    link = AdvisorLink(FlakyClient(0, down_for=None), want_actions=True, want_clip=False, lag_steps=2,
                       down_wait_s=0.2, probe_interval_s=0.0)
    assert drive(link) == []
    assert link.not_repeatable_from == 1
    assert link.state_dict()["not_repeatable_from"] == 1


def test_a_stop_request_while_waiting_for_due_answers_loses_none_of_them():
    from found_rl.train.stopping import Interrupted

    class SlowClient(ScriptedClient):
        def poll(self, wait_s=0.0):
            return [] if wait_s else super().poll(wait_s)  # nothing arrives while the link waits

    requests = {"stop": True}

    def check_interrupt():
        if requests.pop("stop", False):
            raise Interrupted("SIGINT")

    client = SlowClient(0)
    link = AdvisorLink(client, want_actions=True, want_clip=False, lag_steps=0, check_interrupt=check_interrupt)
    with pytest.raises(Interrupted):
        drive(link, lock_steps=1)
    client.poll = ScriptedClient.poll.__get__(client)  # answers flow again: the final checkpoint's wait
    state = link.state_dict()
    assert state["due"] == [[1, [item_id("a", (0, 0, 1))]]]
    resumed = AdvisorLink(ScriptedClient(0), want_actions=True, want_clip=False, lag_steps=0)
    resumed.load_state_dict(state)
    attached = []
    resumed.collect(lambda sid, a, b: attached.append(tuple(sid)) or True, 1, 1)
    assert attached == [(0, 0, 1)]


def test_a_busy_answer_is_counted_and_does_not_mark_the_advisor_down():
    class BusyClient(ScriptedClient):
        def submit(self, item_id, payload, kind="advise"):
            self.queue.append([0, item_id, {"ok": False, "error": "429", "busy": True}])

    link = AdvisorLink(BusyClient(0), want_actions=True, want_clip=False)
    for step in range(5):
        link.submit((0, 0, step), {"command": 4, "speed_mps": 1.0}, np.zeros(2), step)
        link.collect(lambda *args: True, step)
    link.collect(lambda *args: True, 5)
    assert link.is_up and link.stats.busy == 5 and link.stats.skipped == 0


def test_only_the_budgeted_observations_are_asked_about():
    from fast_sampler import StepBatch  # noqa: F401  (the batch below has its fields)
    from found_rl.train.label_budget import is_labelled

    class Recorder(ScriptedClient):
        def __init__(self):
            super().__init__(0)
            self.ids = []

        def submit(self, item_id, payload, kind="advise"):
            self.ids.append(item_id)

    client = Recorder()
    link = AdvisorLink(client, want_actions=True, want_clip=False, rate=0.3)
    sampler = FastSampler(InProcessExecutor([CounterEnv, CounterEnv]), lambda obs: np.zeros((2, 2), np.float32),
                          rho=1.0, horizon=1000, seed=0)
    expected = []
    with sampler:
        for lock_step in range(1, 200):
            batch = sampler.step()
            link.submit_lockstep(batch, lock_step, lock_step)
            for clip in np.flatnonzero(batch.valid):
                if is_labelled(batch.clip_index[clip], batch.episode_index[clip], batch.step_index[clip], 0.3):
                    expected.append(item_id("a", batch.step_id(int(clip))))
    assert client.ids == expected and 0.2 < len(expected) / (2 * 199) < 0.4


@pytest.mark.parametrize("lag, expected_lag, mean_request", [("auto", 160, 16), (16, 16, 2.6)])
def test_an_auto_label_lag_lets_a_low_rate_send_full_requests(lag, expected_lag, mean_request):
    """At rate 0.05, four clips ask about 0.2 observations a lock-step: a lag of 16 sends requests of
    under three items (one, and those of the 8 lock-steps it waits); the auto lag (160) waits for 16
    and is reported for the run config."""

    class Requests(ScriptedClient):
        def __init__(self):
            super().__init__(0)
            self.sizes = []

        def submit_many(self, items):
            self.sizes.append(len(items))
            super().submit_many(items)

    client, chosen = Requests(), []
    link = AdvisorLink(client, want_actions=True, want_clip=False, rate=0.05, lag_steps=lag, request_items=16,
                       on_budget_chosen=chosen.append)
    env = functools.partial(CounterEnv, 10_000)
    sampler = FastSampler(InProcessExecutor([env] * 4), lambda obs: np.zeros((4, 2), np.float32),
                          rho=1.0, horizon=10_000, seed=0)
    with sampler:
        for lock_step in range(1, 400):
            link.submit_lockstep(sampler.step(), lock_step, lock_step)
            link.collect(lambda *args: True, lock_step, lock_step)
    assert link.lag_steps == expected_lag and link.summary()["label_lag_steps"] == expected_lag
    assert [(budget.rate, budget.lag_steps, budget.answers_per_s) for budget in chosen] == (
        [(0.05, 160, None)] if lag == "auto" else [])  # a given rate and lag: nothing to record
    assert np.mean(client.sizes) == pytest.approx(mean_request, rel=0.25) and max(client.sizes) <= 16

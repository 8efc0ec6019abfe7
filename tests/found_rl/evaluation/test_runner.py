"""Runner order, seeding and resume after an interruption, on a tiny stand-in env."""

import json

import gymnasium as gym
import numpy as np
import pytest

from found_rl.evaluation.results import ResultsFile
from found_rl.evaluation.runner import episode_seed, evaluate
from found_rl.events import EpisodeStatus, EpisodeSummary


class CountingEnv(gym.Env):
    """Each route is 3 steps long; completion is 1 for even routes, 0.5 for odd ones."""

    observation_space = gym.spaces.Box(-1, 1, (1,))
    action_space = gym.spaces.Box(-1, 1, (2,))

    def __init__(self) -> None:
        self.resets: list[tuple[int, int]] = []
        self.snapshot = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.route = options["route_index"]
        self.resets.append((self.route, seed))
        self.steps = 0
        return np.zeros(1, np.float32), {"speed_mps": 0.0, "command": 4}

    def step(self, action):
        self.steps += 1
        info = {"speed_mps": 1.0, "command": 4}
        done = self.steps == 3
        if done:
            completion = 1.0 if self.route % 2 == 0 else 0.5
            status = EpisodeStatus.COMPLETED if completion == 1.0 else EpisodeStatus.FAILED_BLOCKED
            info["episode"] = EpisodeSummary(
                f"r{self.route}", status, completion, 100.0, 100.0 * completion, 0.0, 0.3, 3, ()
            )
        return np.zeros(1, np.float32), 0.0, done, False, info


class InterruptingAgent:
    name = "test"

    def __init__(self, interrupt_on_reset: int | None = None) -> None:
        self.interrupt_on_reset = interrupt_on_reset
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1
        if self.resets == self.interrupt_on_reset:
            raise KeyboardInterrupt

    def act(self, obs, snapshot):
        return np.zeros(2, np.float32)

    def close(self) -> None:
        pass


IDENTITY = {"agent": "test"}


def test_routes_run_in_file_order_with_fixed_seeds(tmp_path):
    env = CountingEnv()
    results = ResultsFile(tmp_path / "r.json", IDENTITY, total=6)
    totals = evaluate(
        env, InterruptingAgent(), results, num_routes=3, repetitions=2, seed=7, show_progress=False
    )
    assert [route for route, _ in env.resets] == [0, 0, 1, 1, 2, 2]
    assert [seed for _, seed in env.resets] == [episode_seed(7, r, k) for r in range(3) for k in range(2)]
    assert len({seed for _, seed in env.resets}) == 6
    assert totals.route_completion == pytest.approx((1 + 1 + 0.5 + 0.5 + 1 + 1) / 6)


def test_resume_after_interruption_runs_only_missing_routes(tmp_path):
    path = tmp_path / "r.json"
    with pytest.raises(KeyboardInterrupt):
        evaluate(
            CountingEnv(),
            InterruptingAgent(interrupt_on_reset=3),
            ResultsFile(path, IDENTITY, 4),
            4,
            1,
            0,
            show_progress=False,
        )
    saved = json.loads(path.read_text())
    assert [r["index"] for r in saved["_checkpoint"]["records"]] == [0, 1]
    assert saved["entry_status"] == "Started"

    env = CountingEnv()
    evaluate(env, InterruptingAgent(), ResultsFile(path, IDENTITY, 4), 4, 1, 0, show_progress=False)
    assert [route for route, _ in env.resets] == [2, 3]
    final = json.loads(path.read_text())
    assert [r["index"] for r in final["_checkpoint"]["records"]] == [0, 1, 2, 3]
    assert final["entry_status"] == "Finished"
    assert final["_checkpoint"]["global_record"]["scores"]["score_route"] == pytest.approx(75.0)

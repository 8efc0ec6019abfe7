"""The served prompt is the training prompt: one speed definition, checked through both real paths.

The training data's prompt comes from ``expert collect``'s ``expert_steps``; the served one from
the training env's ``AdviceInfo`` request, over the wire schema, to the HF backend's
``item_prompt``. On a car reported rolling backwards, ``|v|`` and the forward speed differ in
sign, so a path that used ``|v|`` would write another prompt.
"""

import dataclasses
import json

import numpy as np
import pytest

from found_rl.dataset.collect import PerturbationConfig, expert_steps
from found_rl.dataset.text import IMAGE_TOKEN, prompt_speed_mps
from found_rl.env import DrivingEnv
from found_rl.scenario import parse_scenario
from found_rl.train.envs import ADVICE_KEY, AdviceInfo
from tests.scenes import ScriptedBackend, snapshot
from vlm_server.backends.hf_vlm import item_prompt
from vlm_server.client import advise_payload
from vlm_server.schemas import AdviseItemBody

SCENARIO = parse_scenario(
    {"map": {"generate": {"type": "grid"}}, "routes": {"random_length_m": 100}, "episode": {"max_steps": 300}}
)


class BackwardsBackend(ScriptedBackend):
    """The scripted world, with the ego's velocity reported against its heading (rolling backwards)."""

    def _snapshot(self, throttle: float = 0.0, brake: float = 0.0):
        world = super()._snapshot(throttle, brake)
        return dataclasses.replace(world, ego=dataclasses.replace(world.ego, velocity_xy=-world.ego.velocity_xy))


class LastInfo:
    """Keeps the info of the latest reset or step (the one about the current observation)."""

    def __init__(self, env):
        self.env, self.info = env, None

    def __getattr__(self, name):
        return getattr(self.env, name)

    def reset(self, **kwargs):
        obs, self.info = self.env.reset(**kwargs)
        return obs, self.info

    def step(self, action):
        obs, reward, terminated, truncated, self.info = self.env.step(action)
        return obs, reward, terminated, truncated, self.info


def served_prompt(advice: dict) -> str:
    """What the HF advisor server prompts for this advice request, through the wire schema."""
    payload = advise_payload(None, advice["command"], advice["speed_mps"], advice.get("state"))
    body = AdviseItemBody.model_validate(json.loads(json.dumps({"id": "item", **payload})))
    return item_prompt(body.to_item())


def test_prompt_speed_is_the_signed_forward_speed():
    backwards = snapshot(0, (10.0, 0.0), yaw_deg=90.0, speed_mps=-3.0)
    assert backwards.ego.speed_mps == pytest.approx(3.0)
    assert prompt_speed_mps(backwards.ego) == pytest.approx(-3.0)


def test_served_prompt_equals_training_prompt_for_the_same_state():
    env = DrivingEnv(SCENARIO, backend=BackwardsBackend(num_routes=1, oncoming_cars=1), observation="bev",
                     render_mode="rgb_array")
    recorder = LastInfo(AdviceInfo(env, state="prompt", with_image=False))  # what a served VLM is sent
    rng = np.random.default_rng(0)
    speeds = []
    for step in expert_steps(recorder, 12, PerturbationConfig(), rng):
        advice = recorder.info[ADVICE_KEY]
        training = step.chat["conversations"][0]["value"].removeprefix(IMAGE_TOKEN)
        assert served_prompt(advice) == training
        speeds.append(step.metadata["speed_mps"])
    env.close()
    assert min(speeds) < -0.1  # the car rolled "backwards": |v| would have printed another prompt

"""The expert as a vlm_server advisor plug-in: in-process and served over HTTP."""

import asyncio

import numpy as np
import pytest

from found_rl import testing
from found_rl.advisors import ExpertAdvisor
from found_rl.evaluation.advisor_agent import AdvisorAgent
from found_rl.expert import ExpertDriver
from vlm_server.app import create_app
from vlm_server.backends.base import AdviseItem
from vlm_server.config import BackendConfig, BatchingConfig, ServerConfig

LANE_Y = testing.EAST_LANE_Y


def scene():
    """The ego a little left of its lane, a car 17 m ahead."""
    return testing.snapshot(0, (8.0, LANE_Y - 0.5), speed_mps=4.0, vehicles=testing.boxes([(25.0, LANE_Y)]))


def test_advisor_answers_like_the_driver_and_reports_bad_state():
    driver = ExpertDriver()
    action = driver.act(scene())
    state = driver.last_observation.to_dict()
    advisor = ExpertAdvisor()
    advisor.load()
    good, missing, bad = advisor.advise_batch(
        [
            AdviseItem("a", None, 4, 4.0, state),
            AdviseItem("b", None, 4, 4.0, None),
            AdviseItem("c", None, 4, 4.0, {**state, "speed_mps": "fast"}),
        ]
    )
    np.testing.assert_allclose(good.action, action, atol=1e-6)
    assert missing.action is None and "state" in missing.error
    assert bad.action is None and "speed_mps" in bad.error


def test_advisor_options_are_checked():
    assert ExpertAdvisor(cruise_speed_mps=5.0).config.cruise_speed_mps == 5.0
    with pytest.raises(ValueError, match="unknown options"):
        ExpertAdvisor(cruise_sped=3.0)


async def test_served_expert_drives_the_advisor_agent_like_the_local_driver(aiohttp_server):
    config = ServerConfig(
        advisor=BackendConfig(spec="expert", batching=BatchingConfig(max_batch_size=4, max_wait_ms=1.0))
    )
    server = await aiohttp_server(create_app(config))
    url = str(server.make_url("/")).rstrip("/")

    def drive() -> np.ndarray:
        agent = AdvisorAgent(url, timeout_s=5.0)
        try:
            agent.reset()
            return agent.act({}, scene())
        finally:
            agent.close()

    action = await asyncio.to_thread(drive)
    np.testing.assert_allclose(action, ExpertDriver().act(scene()), atol=1e-5)

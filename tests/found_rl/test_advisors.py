"""The expert as a vlm_server advisor plug-in: in-process and served over HTTP."""

import asyncio

import numpy as np
import pytest

from found_rl.advisors import ExpertAdvisor
from found_rl.evaluation.advisor_agent import AdvisorAgent
from found_rl.expert import ExpertDriver
from tests import scenes
from vlm_server.app import create_app
from vlm_server.backends.base import AdviseItem
from vlm_server.config import BackendConfig, BatchingConfig, ServerConfig

LANE_Y = scenes.EAST_LANE_Y


def scene():
    """The ego a little left of its lane, a car 17 m ahead."""
    return scenes.snapshot(0, (8.0, LANE_Y - 0.5), speed_mps=4.0, vehicles=scenes.boxes([(25.0, LANE_Y)]))


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


def test_the_noise_options_corrupt_answers_as_stated():
    driver = ExpertDriver()
    clean = np.asarray(driver.act(scene()))
    state = driver.last_observation.to_dict()
    items = [AdviseItem(str(i), None, 4, 4.0, state) for i in range(50)]
    served = np.array([r.action for r in ExpertAdvisor(noise_std=0.5, noise_seed=3).advise_batch(items)])
    assert np.abs(served).max() <= 1.0 and np.abs(served - clean).max() > 0.1  # corrupted on the real path

    def corrupt(action, **options) -> np.ndarray:
        advisor = ExpertAdvisor(**options)
        return np.array([advisor._corrupted(action, f"a:0.0.{i}") for i in range(4000)])

    np.testing.assert_array_equal(corrupt((0.3, -0.2)), np.broadcast_to((0.3, -0.2), (4000, 2)))
    deviation = corrupt((0.0, 0.0), noise_std=0.1, noise_seed=1)
    assert abs(deviation.std(axis=0) - 0.1).max() < 0.01 and abs(deviation.mean(axis=0)).max() < 0.01
    random = corrupt((0.3, -0.2), random_fraction=0.2, noise_seed=1)
    replaced = np.any(np.abs(random - (0.3, -0.2)) > 1e-9, axis=1)
    assert 0.17 < replaced.mean() < 0.23  # about 20 % of the answers replaced ...
    assert abs(random[replaced].std(axis=0) - 1 / np.sqrt(3)).max() < 0.05  # ... by uniform draws on [-1, 1]
    np.testing.assert_array_equal(random, corrupt((0.3, -0.2), random_fraction=0.2, noise_seed=1))  # seeded
    assert np.abs(corrupt((0.95, -0.95), noise_std=0.5, random_fraction=0.2)).max() <= 1.0
    # the corruption belongs to the item: the same ids in another order and batching get the same answers
    advisor = ExpertAdvisor(noise_std=0.5, random_fraction=0.2, noise_seed=3)
    forward = {item.id: r.action for item, r in zip(items, advisor.advise_batch(items))}
    backward = {item.id: r.action for item, r in zip(items[::-1], advisor.advise_batch(items[::-1]))}
    assert forward == backward
    for bad in ({"noise_std": -1.0}, {"noise_std": float("inf")}, {"random_fraction": 1.5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            ExpertAdvisor(**bad)


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


async def test_following_a_step_keeps_the_advisor_agent_in_step_without_a_request(aiohttp_server):
    config = ServerConfig(
        advisor=BackendConfig(spec="expert", batching=BatchingConfig(max_batch_size=4, max_wait_ms=1.0))
    )
    server = await aiohttp_server(create_app(config))
    url = str(server.make_url("/")).rstrip("/")
    steps = [scenes.snapshot(0, (x, LANE_Y), speed_mps=4.0) for x in (8.0, 12.0, 16.0)]

    def drive(follow_first: bool) -> tuple[np.ndarray, int, int]:
        agent = AdvisorAgent(url, timeout_s=5.0)
        requests = 0
        advise = agent.client.advise

        def counted(*args):
            nonlocal requests
            requests += 1
            return advise(*args)

        agent.client.advise = counted
        try:
            agent.reset()
            for snapshot in steps[:-1]:
                agent.follow({}, snapshot) if follow_first else agent.act({}, snapshot)
            return agent.act({}, steps[-1]), agent.observer.route_index, requests
        finally:
            agent.close()

    followed, asked = await asyncio.to_thread(drive, True), await asyncio.to_thread(drive, False)
    assert (followed[2], asked[2]) == (1, 3)
    assert followed[1] == asked[1] > 0  # the same route progress either way
    np.testing.assert_allclose(followed[0], asked[0])

"""DrivingEnv on a scripted straight-road world (fast, no SUMO) and on the real SUMO backend."""

from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import found_rl
from found_rl.env import DrivingEnv
from found_rl.events import EpisodeStatus, EpisodeSummary, InfractionKind
from found_rl.scenario import Scenario, parse_scenario
from found_rl.state_vector import STATE_SIZE
from tests.scenes import ScriptedBackend

SCENARIO = parse_scenario(
    {"map": {"generate": {"type": "grid"}}, "routes": {"random_length_m": 100}, "episode": {"max_steps": 400}}
)
QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "small_grid.yaml"


def make_env(**kwargs) -> DrivingEnv:
    backend = kwargs.pop("backend", None) or ScriptedBackend()
    return DrivingEnv(SCENARIO, backend=backend, **kwargs)


def rollout(env: DrivingEnv, actions: np.ndarray, seed: int) -> list:
    obs, info = env.reset(seed=seed)
    trace = [(obs, info)]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return trace


def cruise(env: DrivingEnv, max_steps: int = 400, target_mps: float = 6.0):
    """Drive straight at about ``target_mps``; return the last step's results."""
    for _ in range(max_steps):
        acc = 0.6 if env.unwrapped.snapshot.ego.speed_mps < target_mps else 0.0
        result = env.step(np.array([acc, 0.0], np.float32))
        if result[2] or result[3]:
            return result
    raise AssertionError("episode did not end")


# ------------------------------------------------------------------------------ contract


@pytest.mark.filterwarnings("ignore:.*infinity:UserWarning", "ignore:.*alternative render modes:UserWarning")
@pytest.mark.parametrize("observation", ["bev", "state"])
def test_passes_gymnasium_env_checker(observation):
    env = make_env(observation=observation, render_mode="rgb_array")
    check_env(env, skip_render_check=False)


def test_observation_layout_and_render():
    env = make_env(render_mode="rgb_array")
    obs, info = env.reset(seed=0)
    assert obs["bev"].shape == (15, 96, 96) and obs["bev"].dtype == np.uint8
    assert obs["state"].shape == (STATE_SIZE,) and obs["state"].dtype == np.float32
    assert env.observation_space.contains(obs)
    assert obs["bev"][1].max() == 255  # the route is drawn
    assert env.render().shape == (192, 192, 3)
    assert info["step"] == 0 and info["command"] == 4 and info["infractions"] == []


def test_an_env_switches_between_bev_and_state_observations():
    """An evaluation worker drives blind agents without rendering a BEV and policies with one."""
    env = make_env()
    env.set_observation("state")
    observation, _ = env.reset(seed=0)
    assert set(observation) == {"state"} and set(env.observation_space.spaces) == {"state"}
    assert env.rgb_bev().shape == (192, 192, 3)  # a video still renders on request
    env.set_observation("bev")
    observation, _ = env.reset(seed=0)
    assert set(observation) == {"bev", "state"} and env.observation_space.contains(observation)


def test_a_state_env_cannot_switch_to_bev():
    env = make_env(observation="state")
    with pytest.raises(ValueError, match="observation='bev'"):
        env.set_observation("bev")
    with pytest.raises(ValueError, match="'bev' or 'state'"):
        env.set_observation("rgb")


def test_registered_id_builds_the_env():
    assert found_rl.DRIVING_ENV_ID == "found_rl/Driving-v0"
    env = gymnasium.make(found_rl.DRIVING_ENV_ID, scenario=SCENARIO, backend=ScriptedBackend(), observation="state")
    assert isinstance(env.unwrapped, DrivingEnv)
    env.reset(seed=0)
    env.close()


@pytest.mark.parametrize(
    "action, message",
    [
        (np.array([np.nan, 0.0], np.float32), "finite"),
        (np.array([0.0, 1.5], np.float32), r"\[-1, 1\]"),
        (np.array([-1.2, 0.0], np.float32), r"\[-1, 1\]"),
        (np.zeros(3, np.float32), "shape"),
    ],
)
def test_bad_actions_raise(action, message):
    env = make_env(observation="state")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=message):
        env.step(action)


def test_reset_options_are_checked():
    env = make_env(observation="state")
    with pytest.raises(ValueError, match="route_index"):
        env.reset(options={"route_index": 5})
    with pytest.raises(ValueError, match="unknown options"):
        env.reset(options={"weather": "rain"})
    env.reset(options={"route_index": 1})
    assert env.snapshot.route.route_id == "straight-1"


def test_random_route_scenarios_refuse_a_route_index():
    env = make_env(backend=ScriptedBackend(num_routes=0), observation="state")
    env.reset(seed=0)  # the backend draws the route
    with pytest.raises(ValueError, match="random routes"):
        env.reset(options={"route_index": 0})


def test_missing_scenario_file_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"missing\.yaml"):
        DrivingEnv(tmp_path / "missing.yaml")


def test_unknown_reward_name_is_an_error():
    with pytest.raises(ValueError, match="reward"):
        make_env(reward="dense")


def test_stepping_after_the_end_needs_a_reset():
    env = make_env(observation="state", max_steps=2)
    env.reset(seed=0)
    env.step(np.zeros(2, np.float32))
    assert env.step(np.zeros(2, np.float32))[3]  # truncated
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(2, np.float32))


# ----------------------------------------------------------------------------- episodes


def test_same_seed_gives_the_same_rollout():
    actions = np.random.default_rng(1).uniform(-0.2, 1.0, size=(60, 2)).astype(np.float32)
    actions[:, 1] *= 0.05
    first = rollout(make_env(), actions, seed=7)
    second = rollout(make_env(), actions, seed=7)
    other = rollout(make_env(), actions, seed=8)
    assert len(first) == len(second)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a[0]["bev"], b[0]["bev"])
        np.testing.assert_array_equal(a[0]["state"], b[0]["state"])
        assert a[1:] == b[1:]  # rewards, flags and infos
    assert any(not np.array_equal(a[0]["bev"], b[0]["bev"]) for a, b in zip(first, other, strict=False))


def test_driving_the_route_completes_it():
    env = make_env(observation="state")
    env.reset(seed=0, options={"route_index": 0})
    _, _, terminated, truncated, info = cruise(env)
    assert terminated and not truncated
    summary = info["episode"]
    assert isinstance(summary, EpisodeSummary)
    assert summary.status is EpisodeStatus.COMPLETED
    assert summary.route_completion == 1.0 and summary.infractions == ()
    assert summary.distance_m == pytest.approx(99.0, abs=1.0)
    assert info["reward_terms"]["terminal"] == 0.0


def test_running_a_red_light_terminates_with_a_speed_penalty():
    env = make_env(backend=ScriptedBackend(light_x_m=30.0), observation="state")
    obs, _ = env.reset(seed=0)
    assert obs["state"][6] == 0.0  # the light is beyond the 18 m horizon at the start
    _, _, terminated, _, info = cruise(env)
    assert terminated
    assert [i.kind for i in info["infractions"]] == [InfractionKind.RED_LIGHT]
    assert info["episode"].status is EpisodeStatus.FAILED_RED_LIGHT
    assert info["reward_terms"]["terminal"] == pytest.approx(-1.0 - info["speed_mps"])


def test_red_light_appears_in_the_state_vector():
    env = make_env(backend=ScriptedBackend(light_x_m=20.0), observation="state")
    obs, _ = env.reset(seed=0)
    # Ego front at 2.4 m: the stop line is 17.6 m ahead, inside Roach's 18 m light search.
    assert obs["state"][6] == 1.0 and obs["state"][7] == 1.0


def test_steering_off_the_road_is_a_layout_collision():
    env = make_env(observation="state")
    env.reset(seed=0)
    for _ in range(100):
        _, _, terminated, _, info = env.step(np.array([0.5, 0.6], np.float32))
        if terminated:
            break
    assert terminated
    assert info["episode"].status is EpisodeStatus.FAILED_COLLISION
    assert InfractionKind.COLLISION_LAYOUT in [i.kind for i in info["infractions"]]


def test_time_limit_truncates_with_a_route_timeout():
    env = make_env(observation="state", max_steps=5)
    env.reset(seed=0)
    for _ in range(5):
        _, _, terminated, truncated, info = env.step(np.zeros(2, np.float32))
    assert truncated and not terminated
    assert info["episode"].status is EpisodeStatus.FAILED_TIMEOUT
    assert [i.kind for i in info["infractions"]] == [InfractionKind.ROUTE_TIMEOUT]


def with_route_timeout(s_per_m: float, initial_s: float) -> Scenario:
    timeout = {"route_timeout": {"s_per_m": s_per_m, "initial_s": initial_s}}
    return parse_scenario({**SCENARIO.model_dump(exclude={"episode"}), "episode": {"max_steps": 400, **timeout}})


@pytest.mark.parametrize(("route_index", "length_m"), [(0, 100.0), (1, 120.0)])
def test_route_timeout_scales_the_step_limit_with_the_route(route_index, length_m):
    # ScriptedBackend's route i is 100 + 20 i metres: 0.1 s/m and 0.5 s give 10.5 or 12.5 s.
    env = DrivingEnv(with_route_timeout(0.1, 0.5), backend=ScriptedBackend(), observation="state")
    env.reset(seed=0, options={"route_index": route_index})
    expected = round((0.1 * length_m + 0.5) * 10)
    assert env.step_limit == expected
    for step in range(1, expected + 1):
        _, _, terminated, truncated, info = env.step(np.zeros(2, np.float32))
        assert truncated == (step == expected) and not terminated
    assert info["episode"].status is EpisodeStatus.FAILED_TIMEOUT
    assert [i.kind for i in info["infractions"]] == [InfractionKind.ROUTE_TIMEOUT]


def test_max_steps_caps_a_longer_route_timeout():
    # The leaderboard's 0.8 s/m + 5 s gives 850 steps for 100 m; max_steps 400 comes first.
    env = DrivingEnv(with_route_timeout(0.8, 5.0), backend=ScriptedBackend(), observation="state")
    env.reset(seed=0, options={"route_index": 0})
    assert env.step_limit == 400


def test_without_route_timeout_the_limit_is_max_steps():
    env = make_env(observation="state")
    env.reset(seed=0, options={"route_index": 1})
    assert SCENARIO.episode.route_timeout is None and env.step_limit == 400


def test_carl_reward_sums_to_route_completion():
    env = make_env(observation="state", reward="carl")
    env.reset(seed=0)
    total = 0.0
    for _ in range(400):
        acc = 0.5 if env.snapshot.ego.speed_mps < 6.0 else 0.0  # 2 m/s^2: comfortable
        _, reward, terminated, truncated, info = env.step(np.array([acc, 0.0], np.float32))
        total += reward
        if terminated or truncated:
            break
    assert total == pytest.approx(info["route_completion"], abs=0.02)


# ------------------------------------------------------------------------ real SUMO world


@pytest.fixture(scope="module")
def quick_scenario():
    from found_rl.scenario import load_scenario

    scenario = load_scenario(QUICKSTART)
    traffic = scenario.traffic.model_copy(update={"vehicles": (8, 8), "warmup_s": 10.0})
    return scenario.model_copy(update={"traffic": traffic})


def drive_sumo(scenario, seed: int, steps: int) -> list:
    from found_rl.bench.sim import follow_route

    env = DrivingEnv(scenario)
    try:
        obs, info = env.reset(seed=seed)
        trace = [(obs, info)]
        for _ in range(steps):
            obs, reward, terminated, truncated, info = env.step(follow_route(env))
            trace.append((obs, reward, terminated, truncated, info))
            if terminated or truncated:
                break
        return trace
    finally:
        env.close()


@pytest.mark.filterwarnings("ignore:.*infinity:UserWarning", "ignore:.*alternative render modes:UserWarning")
def test_sumo_env_passes_the_env_checker(quick_scenario):
    env = DrivingEnv(quick_scenario, render_mode="rgb_array")
    try:
        check_env(env, skip_render_check=False)
    finally:
        env.close()


def test_sumo_same_seed_gives_the_same_rollout(quick_scenario):
    first = drive_sumo(quick_scenario, seed=3, steps=40)
    second = drive_sumo(quick_scenario, seed=3, steps=40)
    assert len(first) == len(second) > 1
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a[0]["bev"], b[0]["bev"])
        np.testing.assert_array_equal(a[0]["state"], b[0]["state"])
        assert a[1:] == b[1:]


def test_sumo_route_following_makes_progress(quick_scenario):
    trace = drive_sumo(quick_scenario, seed=1, steps=120)
    completions = [step[-1]["route_completion"] for step in trace]
    assert completions == sorted(completions)
    assert completions[-1] > 0.05  # the controller ignores lights and traffic: it may stop early
    assert trace[0][0]["bev"][1].max() == 255
    last = trace[-1]
    if last[2] or last[3]:
        assert isinstance(last[-1]["episode"], EpisodeSummary)


def test_standing_for_the_scenarios_blocked_time_terminates():
    scenario = SCENARIO.model_copy(update={"episode": SCENARIO.episode.model_copy(update={"blocked_s": 2.0})})
    env = DrivingEnv(scenario, backend=ScriptedBackend(), observation="state")
    env.reset(seed=0)
    steps = 0
    terminated = truncated = False
    while not (terminated or truncated) and steps < 30:
        _, _, terminated, truncated, info = env.step(np.zeros(2, np.float32))
        steps += 1
    assert terminated and steps == 20  # 2 s of standing at 10 Hz
    assert info["episode"].status is EpisodeStatus.FAILED_BLOCKED
    assert info["reward_terms"]["terminal"] == -1.0


def test_sumo_expert_driving_raises_no_false_infractions(quick_scenario):
    # The privileged expert stops for red lights and leaders and follows the lane: exact
    # geometry must not flag it (a cross-check of the infraction rules on real SUMO maps).
    from found_rl.expert import ExpertDriver

    env = DrivingEnv(quick_scenario, observation="state")
    driver = ExpertDriver()
    serious = {
        InfractionKind.COLLISION_VEHICLE,
        InfractionKind.COLLISION_PEDESTRIAN,
        InfractionKind.COLLISION_LAYOUT,
        InfractionKind.RED_LIGHT,
        InfractionKind.ROUTE_DEVIATION,
    }
    try:
        env.reset(seed=0)
        driver.reset()
        for _ in range(300):
            _, _, terminated, truncated, info = env.step(np.clip(driver.act(env.snapshot), -1.0, 1.0))
            assert not serious & {i.kind for i in info["infractions"]}, info["infractions"]
            if terminated or truncated:
                env.reset()
                driver.reset()
    finally:
        env.close()


def test_a_run_config_given_as_the_scenario_says_so_and_names_its_scenarios():
    quickstart = Path(found_rl.__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"
    with pytest.raises(ValueError, match=r"quickstart\.yaml: is a run config .*its scenarios are .*small_grid\.yaml"):
        gymnasium.make("found_rl/Driving-v0", scenario=str(quickstart))

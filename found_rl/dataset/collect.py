"""Collect expert-labelled driving data, optionally with action perturbations and recovery (DART-style).

Every sample pairs the observation o_t with the *expert's* action for o_t. With perturbations,
the executed action is sometimes offset for a short burst, so the car drifts into off-nominal
states; the stored labels there are still the expert's corrections, which teach recovery. With
a driver (DAgger, ``mixing.py``) a learner executes most steps and the expert only labels them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from found_rl.dataset.mixing import DaggerMix, Driver
from found_rl.dataset.shards import ShardWriter
from found_rl.dataset.text import chat_sample, clip_caption, prompt_speed_mps
from found_rl.dataset.towns import Segment, Town, plan_segments
from found_rl.errors import UserError
from found_rl.expert import ExpertDriver, expert_action


@dataclass(frozen=True)
class PerturbationConfig:
    """Bursts of constant action offsets.

    Attributes:
        chance_per_step: chance, at each step outside a burst, that a burst starts there
            (0 disables perturbations). Because a burst lasts ``duration_steps``, the perturbed
            share of samples is much larger: see :meth:`expected_fraction`.
        duration_steps: length of a burst, steps of 0.1 s.
        steer_offset: maximum absolute steer offset (drawn uniformly, random sign).
        acc_offset: standard deviation of the acc offset.
    """

    chance_per_step: float = 0.0
    duration_steps: int = 10
    steer_offset: float = 0.4
    acc_offset: float = 0.3

    def __post_init__(self) -> None:
        if not 0.0 <= self.chance_per_step <= 1.0:
            raise UserError(f"--perturb-chance must be a probability in [0, 1], got {self.chance_per_step}")
        if self.duration_steps < 1:
            raise ValueError(f"perturbation duration_steps must be >= 1, got {self.duration_steps}")

    def expected_fraction(self) -> float:
        """Long-run share of perturbed steps: ``d·p / (d·p + 1 − p)``.

        Between bursts the wait is geometric with mean ``(1 − p) / p`` steps, then a burst
        covers ``d`` steps (renewal argument). Episode ends cut bursts short, so a dataset of
        short episodes comes out a little below this.
        """
        chance, duration = self.chance_per_step, self.duration_steps
        if chance == 0.0:
            return 0.0
        return duration * chance / (duration * chance + 1.0 - chance)


class ActionPerturber:
    """Adds a constant offset to the action during bursts started at random steps."""

    def __init__(self, config: PerturbationConfig, rng: np.random.Generator) -> None:
        self.config = config
        self.rng = rng
        self._left = 0
        self._offset = np.zeros(2, dtype=np.float32)

    def reset(self) -> None:
        self._left = 0

    @property
    def is_active(self) -> bool:
        return self._left > 0

    def apply(self, action: np.ndarray) -> np.ndarray:
        """The action to execute: ``action`` itself, or ``action + offset`` during a burst."""
        config = self.config
        if self._left == 0 and config.chance_per_step > 0 and self.rng.random() < config.chance_per_step:
            self._left = config.duration_steps
            steer = self.rng.uniform(0.5, 1.0) * config.steer_offset * self.rng.choice((-1.0, 1.0))
            self._offset = np.array([self.rng.normal(0.0, config.acc_offset), steer], dtype=np.float32)
        if self._left == 0:
            return action
        self._left -= 1
        return np.clip(action + self._offset, -1.0, 1.0).astype(np.float32)


@dataclass(frozen=True)
class ExpertStep:
    """One sample as the expert labelled it, before it is encoded and written.

    ``metadata["meta"]["episode"]`` counts the episodes of this stream from 0.
    """

    bev_rgb: np.ndarray
    masks: np.ndarray
    metadata: dict[str, Any]
    caption: str
    chat: dict[str, Any]
    is_perturbed: bool


def expert_steps(
    env: Any,
    steps: int,
    perturbation: PerturbationConfig,
    rng: np.random.Generator,
    *,
    town: Town | None = None,
    mix: DaggerMix | None = None,
    first_episode: int = 0,
) -> Iterator[ExpertStep]:
    """Label ``steps`` samples with the expert (resetting episodes as they end).

    Args:
        env: ``observation="bev"``, ``render_mode="rgb_array"``.
        steps: samples to yield.
        perturbation: bursts added to the executed action (after ``mix`` picked it).
        rng: the stream's generator (episode seeds, routes, perturbations, the mixture).
        town: recorded in each sample's ``meta`` (``town``, ``network``) when given.
        mix: who drives each step (default: the expert alone).
        first_episode: ``meta.episode`` of the first episode (a stream over several towns
            keeps counting).
    """
    driver = ExpertDriver()
    mix = mix or DaggerMix(None, 1.0, rng)
    perturber = ActionPerturber(perturbation, rng)
    unwrapped = env.unwrapped
    town_meta = {"town": town.name, "network": town.network} if town is not None else {}
    episodes = 0
    obs: dict[str, np.ndarray] | None = None
    info: dict[str, Any] = {}
    step_in_episode = 0
    for _ in range(steps):
        if obs is None:
            route_options = {"route_index": int(rng.integers(unwrapped.num_routes))} if unwrapped.num_routes else None
            obs, info = env.reset(seed=int(rng.integers(2**31 - 1)), options=route_options)
            driver.reset()
            mix.reset()
            perturber.reset()
            episodes += 1
            step_in_episode = 0
        snapshot = unwrapped.snapshot
        observation = driver.observe(snapshot)
        action = np.array(expert_action(observation, driver.config), dtype=np.float32)
        chosen, driven_by = mix.choose(action, obs, snapshot)
        executed = perturber.apply(chosen)
        is_perturbed = perturber.is_active or not np.array_equal(executed, chosen)
        acc, steer = float(action[0]), float(action[1])
        speed_mps = prompt_speed_mps(snapshot.ego)
        command = int(info["command"])
        target = observation.target_ego_xy
        yield ExpertStep(
            bev_rgb=env.render(),
            masks=np.asarray(unwrapped.renderer.last_masks, dtype=np.uint8),
            metadata={
                "state": [float(v) for v in obs["state"]],
                "command": command,
                "speed_mps": speed_mps,
                "action": [acc, steer],
                "executed_action": [float(executed[0]), float(executed[1])],
                "target_ego": [float(target[0]), float(target[1])],
                "meta": {
                    "route_id": snapshot.route.route_id,
                    "episode": first_episode + episodes - 1,
                    "step": step_in_episode,
                    "is_perturbed": bool(is_perturbed),
                    "driver": driven_by,
                    **town_meta,
                },
            },
            caption=clip_caption(command, speed_mps, acc, steer),
            chat=chat_sample(speed_mps, target, command, acc, steer),
            is_perturbed=bool(is_perturbed),
        )
        obs, _, terminated, truncated, info = env.step(executed)
        step_in_episode += 1
        if terminated or truncated:
            obs = None


@dataclass(frozen=True)
class StreamConfig:
    """What one collection stream (this process, or one worker) drives, and how.

    Attributes:
        make_env: ``make_env(scenario=...)`` builds an env (``observation="bev"``,
            ``render_mode="rgb_array"``); picklable where workers are spawned.
        towns: every town of the dataset.
        perturbation: action perturbation bursts.
        make_driver: builds the learner that drives (``--driver``), or None for the expert
            alone; picklable where workers are spawned.
        beta: with a driver, the chance per step that the expert's action is executed instead.
    """

    make_env: Callable[..., Any]
    towns: tuple[Town, ...]
    perturbation: PerturbationConfig
    make_driver: Callable[[], Driver] | None = None
    beta: float = 1.0


def stream_steps(config: StreamConfig, segments: list[Segment], rng: np.random.Generator) -> Iterator[ExpertStep]:
    """The samples of one stream: its segments in order, one env per segment, one driver for all.

    Episodes are numbered from 0 across the segments.
    """
    driver = config.make_driver() if config.make_driver is not None else None
    try:
        mix = DaggerMix(driver, config.beta, rng)
        episodes = 0
        for segment in segments:
            town = config.towns[segment.town]
            env = config.make_env(scenario=town.scenario)
            try:
                for sample in expert_steps(
                    env, segment.steps, config.perturbation, rng, town=town, mix=mix, first_episode=episodes
                ):
                    yield sample
                    episodes = sample.metadata["meta"]["episode"] + 1
            finally:
                env.close()
    finally:
        if driver is not None:
            driver.close()


def collect(
    config: StreamConfig,
    writer: ShardWriter,
    steps: int,
    seed: int,
    show_progress: bool = True,
) -> dict[str, int]:
    """Collect ``steps`` samples in this process, over the towns in turn (``plan_segments``), and write them.

    Returns:
        Counts: ``samples``, ``episodes``, ``perturbed`` samples.
    """
    from tqdm import tqdm

    (segments,) = plan_segments(steps, len(config.towns), 1)
    episodes = perturbed = 0
    with tqdm(total=steps, unit="sample", disable=not show_progress, desc="collect") as bar:
        for sample in stream_steps(config, segments, np.random.default_rng(seed)):
            episodes = sample.metadata["meta"]["episode"] + 1
            perturbed += int(sample.is_perturbed)
            writer.write(sample.bev_rgb, sample.masks, sample.metadata, sample.caption, sample.chat)
            bar.update(1)
    return {"samples": steps, "episodes": episodes, "perturbed": perturbed}

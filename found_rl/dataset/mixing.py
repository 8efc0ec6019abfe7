"""Who drives a collection step: the expert, or a learner mixed with it as DAgger does.

DAgger (Ross et al., 2011) trains round ``i`` on states the policy ``π_i = β π* + (1 − β) π̂_i``
visits, labelled by the expert ``π*``. The mixture here is per step: at each step, with
probability ``β`` the expert's action is executed, otherwise the learner's. The stored label is
always the expert's, so the learner's mistakes become states with corrections.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from found_rl.world import WorldSnapshot

EXPERT = "expert"


class Driver(Protocol):
    """A learner that drives (``found_rl.evaluation.agents``: ``advisor:URL``, ``checkpoint:PATH``).

    A driver may also have ``follow(obs, snapshot)``: keep up with a step the expert drives
    without choosing an action (an advisor then skips its request, the dear part of a step).
    A driver without it is asked to ``act`` on every step, its answer unused on the expert's.
    """

    name: str

    def reset(self) -> None: ...

    def act(self, obs: dict[str, np.ndarray], snapshot: WorldSnapshot) -> np.ndarray: ...

    def close(self) -> None: ...


def driver_kind(driver: Driver | None) -> str:
    """``expert`` without a driver, else the driver's kind (``advisor``, ``checkpoint``)."""
    return EXPERT if driver is None else driver.name.partition(":")[0]


class DaggerMix:
    """Picks each step's executed action: the expert's with probability ``beta``, else the driver's.

    Args:
        driver: the learner, or None for expert-only collection (then ``beta`` is unused and no
            random number is drawn, so expert datasets do not depend on it).
        beta: probability per step that the expert's own action is executed.
        rng: the collection stream's generator.
    """

    def __init__(self, driver: Driver | None, beta: float, rng: np.random.Generator) -> None:
        if not 0.0 <= beta <= 1.0:
            raise ValueError(f"beta must be a probability in [0, 1], got {beta}")
        self.driver = driver
        self.beta = beta
        self.rng = rng
        self.kind = driver_kind(driver)

    def reset(self) -> None:
        if self.driver is not None:
            self.driver.reset()

    def choose(
        self, expert: np.ndarray, obs: dict[str, np.ndarray], snapshot: WorldSnapshot
    ) -> tuple[np.ndarray, str]:
        """``(action to execute, who it is from)``.

        The driver sees every step, even one the expert takes (``follow``, else ``act``), so a
        driver that keeps state (a BEV history, its route progress) sees the episode as it runs.
        """
        if self.driver is None:
            return expert, EXPERT
        if self.rng.random() < self.beta:
            follow = getattr(self.driver, "follow", None)
            if callable(follow):
                follow(obs, snapshot)
            else:
                self.driver.act(obs, snapshot)
            return expert, EXPERT
        return np.asarray(self.driver.act(obs, snapshot), dtype=np.float32).reshape(2), self.kind


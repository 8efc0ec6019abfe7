"""The privileged expert driver: observe a WorldSnapshot, act with a pure controller.

``ExpertDriver`` couples the stateful :class:`ExpertObserver` (route index, served stop signs)
with the memoryless :func:`expert_action`, so the same controller runs next to the simulator
and inside the advisor server (``found_rl.advisors:ExpertAdvisor``).
"""

from __future__ import annotations

import numpy as np

from found_rl.expert.control import ExpertConfig, expert_action
from found_rl.expert.observation import ExpertObservation
from found_rl.expert.observer import ExpertObserver, ObserverConfig
from found_rl.world import WorldSnapshot

__all__ = [
    "ExpertConfig",
    "ExpertDriver",
    "ExpertObservation",
    "ExpertObserver",
    "ObserverConfig",
    "expert_action",
]


class ExpertDriver:
    """Drives one ego from privileged snapshots.

    Args:
        config: controller parameters.
        observer_config: feature-extraction ranges.
    """

    def __init__(
        self, config: ExpertConfig | None = None, observer_config: ObserverConfig | None = None
    ) -> None:
        self.config = config or ExpertConfig()
        self.observer = ExpertObserver(observer_config or ObserverConfig())
        self.last_observation: ExpertObservation | None = None

    def reset(self) -> None:
        self.observer.reset()
        self.last_observation = None

    def observe(self, snapshot: WorldSnapshot) -> ExpertObservation:
        self.last_observation = self.observer.observe(snapshot)
        return self.last_observation

    def act(self, snapshot: WorldSnapshot) -> np.ndarray:
        """``(2,)`` float32 action ``(acc, steer)`` for this snapshot."""
        acc, steer = expert_action(self.observe(snapshot), self.config)
        return np.array([acc, steer], dtype=np.float32)

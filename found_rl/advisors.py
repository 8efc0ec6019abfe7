"""The privileged expert as an advisor plug-in of ``vlm_server`` (``found_rl.advisors:ExpertAdvisor``).

The env side computes an :class:`~found_rl.expert.ExpertObservation` next to the simulator and
sends ``observation.to_dict()`` as the request's ``state``; the server runs the memoryless
expert controller on each item. No image is needed. Serve it with the backend alias
``expert`` (``vlm_server.backends.base.BACKEND_ALIASES``).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import fields
from typing import Any

import numpy as np

from found_rl.errors import UserError
from found_rl.expert.control import ExpertConfig, expert_action
from found_rl.expert.observation import ExpertObservation
from vlm_server.backends.base import AdviseItem, AdviseResult


class ExpertAdvisor:
    """Answers advise requests with the expert's action for the request's privileged state.

    A corrupted advisor (the "noisy advisor" test of ``found-rl bench guidance``) is the same
    expert with its answers spoiled on the server, so the corruption travels the real path:
    with probability ``random_fraction`` an answer is replaced by a uniformly random action,
    otherwise Gaussian noise of ``noise_std`` is added to both components (then clipped to
    [-1, 1]).

    Args:
        noise_std: σ of the Gaussian noise on (acc, steer); 0 = none.
        random_fraction: share of answers replaced by uniform random actions, in [0, 1].
        noise_seed: seeds the corruption. Each answer's corruption is drawn from
            ``(noise_seed, item id)``, so it does not depend on how requests were batched or
            ordered: a run's advice repeats.
        **options: any :class:`~found_rl.expert.ExpertConfig` field (e.g.
            ``cruise_speed_mps=6.0``), from the server config.

    Raises:
        ValueError: on an option that is not an ``ExpertConfig`` field, or a bad noise setting.
    """

    def __init__(
        self, noise_std: float = 0.0, random_fraction: float = 0.0, noise_seed: int = 0, **options: Any
    ) -> None:
        allowed = {f.name for f in fields(ExpertConfig)}
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise UserError(
                f"ExpertAdvisor: unknown options {unknown}; allowed: "
                f"{sorted(allowed | {'noise_std', 'random_fraction', 'noise_seed'})}"
            )
        if not (isinstance(noise_std, (int, float)) and math.isfinite(noise_std) and noise_std >= 0):
            raise UserError(f"ExpertAdvisor: noise_std must be a finite number >= 0, got {noise_std!r}")
        if not (isinstance(random_fraction, (int, float)) and 0.0 <= random_fraction <= 1.0):
            raise UserError(f"ExpertAdvisor: random_fraction must be in [0, 1], got {random_fraction!r}")
        self.config = ExpertConfig(**options)
        self.noise_std, self.random_fraction = float(noise_std), float(random_fraction)
        self.noise_seed = int(noise_seed)

    def load(self) -> None:
        """Nothing to load: the expert is a few lines of geometry."""

    def advise_batch(self, items: list[AdviseItem]) -> list[AdviseResult]:
        return [self._advise(item) for item in items]

    def _advise(self, item: AdviseItem) -> AdviseResult:
        if item.state is None:
            return AdviseResult(
                action=None,
                error="expert advisor needs the privileged 'state' (ExpertObservation.to_dict())",
            )
        try:
            observation = ExpertObservation.from_dict(item.state)
        except ValueError as exc:
            return AdviseResult(action=None, error=str(exc))
        return AdviseResult(action=self._corrupted(expert_action(observation, self.config), item.id))

    def _corrupted(self, action: tuple[float, float], item_id: str) -> tuple[float, float]:
        if self.random_fraction == 0.0 and self.noise_std == 0.0:
            return action
        rng = np.random.default_rng([self.noise_seed, zlib.crc32(item_id.encode())])
        if rng.random() < self.random_fraction:
            acc, steer = rng.uniform(-1.0, 1.0, 2)
        else:
            acc, steer = np.clip(np.asarray(action) + rng.normal(0.0, self.noise_std, 2), -1.0, 1.0)
        return float(acc), float(steer)

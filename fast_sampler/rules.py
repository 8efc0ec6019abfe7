"""What a lock-step sampler does when a clip's episode ends, and FAST's adaptive threshold ρ."""

from __future__ import annotations

import enum

import numpy as np


class ClipEndRule(enum.Enum):
    """The four samplers differ only here (METHOD.md §4)."""

    CONTINUE_VIRTUALLY = "fast"
    """FAST/DPSA: pad the ended clip; when the ended fraction reaches ρ (or the horizon is hit)
    truncate the running clips and reset all clips together, in parallel."""
    RESET_CLIP = "per_clip_reset"
    """Lock-step baseline: reset the ended clip before the next lock-step; the batch waits."""
    RESET_ALL = "global_reset"
    """Lock-step baseline: when any clip ends, truncate the others and reset all."""


def check_rho(rho: float) -> float:
    if not 0.0 < rho <= 1.0:
        raise ValueError(f"rho: the ended-clip fraction that triggers a global reset must lie in (0, 1], got {rho}")
    return float(rho)


def check_horizon(horizon: int) -> int:
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise ValueError(f"horizon: T_max must be an int >= 1 (lock-steps per episode), got {horizon!r}")
    return int(horizon)


class AdaptiveRho:
    """Chooses ρ per FAST round to maximise valid transitions per second.

    A small bandit: each candidate ρ keeps decayed sums of the valid transitions it yielded and
    the seconds its rounds took; each round picks the best ratio, or with probability
    ``epsilon`` a random candidate. Untried candidates go first. A low ρ resets often (reset time
    dominates); a high ρ waits for stragglers (padding dominates); the best lies between and
    depends on the env's reset cost and episode lengths, which is why it is measured.

    Args:
        num_clips: N; candidates are multiples of 1/N between ``low`` and 1.
        rng: randomness for exploration.
        low: smallest candidate ρ.
        epsilon: exploration probability after every candidate was tried.
        decay: weight kept by older rounds each time a candidate is updated.
    """

    def __init__(
        self, num_clips: int, rng: np.random.Generator, *, low: float = 0.25, epsilon: float = 0.1, decay: float = 0.8
    ) -> None:
        check_rho(low)
        counts = np.arange(1, num_clips + 1)
        self.candidates = np.unique(np.clip(counts / num_clips, None, 1.0))
        self.candidates = self.candidates[self.candidates >= low - 1e-9]
        if self.candidates.size == 0:
            self.candidates = np.array([1.0])
        self._rng = rng
        self._epsilon = epsilon
        self._decay = decay
        self._valid = np.zeros(len(self.candidates))
        self._seconds = np.zeros(len(self.candidates))
        self._tried = np.zeros(len(self.candidates), bool)

    def choose(self) -> float:
        untried = np.flatnonzero(~self._tried)
        if untried.size:
            return float(self.candidates[untried[0]])
        if self._rng.random() < self._epsilon:
            return float(self._rng.choice(self.candidates))
        return float(self.candidates[np.argmax(self._valid / np.maximum(self._seconds, 1e-12))])

    def update(self, rho: float, valid_transitions: int, seconds: float) -> None:
        arm = int(np.argmin(np.abs(self.candidates - rho)))
        self._valid[arm] = self._decay * self._valid[arm] + valid_transitions
        self._seconds[arm] = self._decay * self._seconds[arm] + seconds
        self._tried[arm] = True

    @property
    def best(self) -> float:
        if not self._tried.any():
            return float(self.candidates[0])
        rates = np.where(self._tried, self._valid / np.maximum(self._seconds, 1e-12), -np.inf)
        return float(self.candidates[np.argmax(rates)])

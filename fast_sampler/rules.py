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

    A local search over candidates k/N: each candidate keeps decayed sums of the valid
    transitions its rounds yielded and the seconds they took. Every round runs the best
    candidate so far, except that untried neighbours of the best are tried first and, with
    probability ``epsilon``, a neighbour is re-measured (the env's episodes drift). A low ρ
    resets often (reset time dominates); a high ρ waits for stragglers (padding dominates). The
    best lies between and depends on the env's reset cost and episode lengths, which is why it
    is measured; searching only next to the best avoids paying for far-off candidates such as
    ρ = 1, which waits for the longest episode of every round.

    Args:
        num_clips: N; candidates are multiples of 1/N between ``low`` and 1.
        rng: randomness for re-measuring neighbours.
        initial: the first ρ to run (rounded to the nearest candidate).
        low: smallest candidate ρ.
        epsilon: probability of re-measuring a neighbour instead of running the best.
        decay: weight kept by older rounds each time a candidate is updated.
    """

    def __init__(
        self,
        num_clips: int,
        rng: np.random.Generator,
        *,
        initial: float = 0.5,
        low: float = 0.25,
        epsilon: float = 0.1,
        decay: float = 0.8,
    ) -> None:
        check_rho(low)
        check_rho(initial)
        candidates = np.arange(1, num_clips + 1) / num_clips
        self.candidates = candidates[candidates >= low - 1e-9]
        if self.candidates.size == 0:
            self.candidates = np.array([1.0])
        self._rng = rng
        self._epsilon = epsilon
        self._decay = decay
        self._initial = int(np.argmin(np.abs(self.candidates - initial)))
        self._valid = np.zeros(len(self.candidates))
        self._seconds = np.zeros(len(self.candidates))
        self._tried = np.zeros(len(self.candidates), bool)

    def choose(self) -> float:
        if not self._tried.any():
            return float(self.candidates[self._initial])
        best = self._best_index()
        neighbours = [i for i in (best - 1, best + 1) if 0 <= i < len(self.candidates)]
        untried = [i for i in neighbours if not self._tried[i]]
        if untried:
            return float(self.candidates[untried[0]])
        if neighbours and self._rng.random() < self._epsilon:
            return float(self.candidates[self._rng.choice(neighbours)])
        return float(self.candidates[best])

    def update(self, rho: float, valid_transitions: int, seconds: float) -> None:
        arm = int(np.argmin(np.abs(self.candidates - rho)))
        self._valid[arm] = self._decay * self._valid[arm] + valid_transitions
        self._seconds[arm] = self._decay * self._seconds[arm] + seconds
        self._tried[arm] = True

    @property
    def best(self) -> float:
        """The candidate with the highest measured throughput (the initial one before any)."""
        index = self._best_index() if self._tried.any() else self._initial
        return float(self.candidates[index])

    def _best_index(self) -> int:
        rates = np.where(self._tried, self._valid / np.maximum(self._seconds, 1e-12), -np.inf)
        return int(np.argmax(rates))

"""Where background actors may appear around the ego: never where a crash is already unavoidable.

A background car inserted behind the ego must be able to stop before reaching it from its
departure speed (upstream gap); one inserted ahead must leave the ego its stopping distance
(downstream gap)::

    gap(v, b) = v · REACTION_S + v² / (2 b) + MARGIN_M

with ``b`` the background drivers' comfortable deceleration upstream and the ego's full brake
downstream. The gap is measured in a straight line between the two boxes' ends (centre
distance less both half-lengths), which is never longer than the way along the lanes, so the
rule also holds on bends and for cars on a neighbouring lane that may change into the ego's.
Walkers may not appear within the ego's stopping distance ahead of it, nor closer than
:data:`WALKER_MIN_M` anywhere. The rule applies at reset, to every respawn during the
episode, and to cars SUMO still holds back for insertion (they are withdrawn when the ego
comes near their departure point).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

REACTION_S = 0.5  # a driver's decision step (0.2 s) plus one simulation step, rounded up
MARGIN_M = 2.0
BACKGROUND_DECEL_MPS2 = 4.5  # SUMO's passenger-car deceleration
WALKER_MIN_M = 5.0


def stopping_gap_m(speed_mps: float, decel_mps2: float) -> float:
    """Road a vehicle at ``speed_mps`` needs to stop with ``decel_mps2``, plus reaction and margin."""
    return speed_mps * REACTION_S + speed_mps**2 / (2.0 * decel_mps2) + MARGIN_M


@dataclass(frozen=True)
class EgoEnvelope:
    """The ego's pose and speed in SUMO's frame, for judging spawn points.

    Attributes:
        xy: ego box centre (SUMO frame).
        heading: unit vector of the ego's heading (SUMO frame).
        speed_mps: ego speed.
        half_length_m: half the ego's length.
        brake_mps2: the ego's full-brake deceleration.
    """

    xy: np.ndarray
    heading: np.ndarray
    speed_mps: float
    half_length_m: float
    brake_mps2: float

    def _ahead_and_gap(self, xy: np.ndarray, half_length_m: float) -> tuple[bool, float]:
        offset = np.asarray(xy, dtype=np.float64) - self.xy
        ahead = float(offset @ self.heading) > 0.0
        return ahead, math.hypot(*offset) - self.half_length_m - half_length_m

    def allows_vehicle(self, xy: np.ndarray, depart_speed_mps: float, half_length_m: float) -> bool:
        """Whether a car (box centre ``xy``) may appear there at ``depart_speed_mps``."""
        ahead, gap_m = self._ahead_and_gap(xy, half_length_m)
        if ahead:
            return gap_m >= stopping_gap_m(self.speed_mps, self.brake_mps2)
        return gap_m >= stopping_gap_m(depart_speed_mps, BACKGROUND_DECEL_MPS2)

    def allows_walker(self, xy: np.ndarray) -> bool:
        """Whether a walker may appear at ``xy``."""
        ahead, gap_m = self._ahead_and_gap(xy, 0.0)
        if ahead:
            return gap_m >= max(WALKER_MIN_M, stopping_gap_m(self.speed_mps, self.brake_mps2))
        return gap_m >= WALKER_MIN_M

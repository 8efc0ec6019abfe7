"""Conversion between SUMO's network frame and CARLA's world frame (ARCHITECTURE §3).

SUMO: x east, y north (right-handed), the network shifted by ``netOffset``; a vehicle's
position is its front bumper and its angle is degrees clockwise from north.
CARLA: x east, y south (left-handed); a box's position is its centre and yaw is degrees
clockwise from east. As in CARLA's SUMO co-simulation (``BridgeHelper``), a point maps by
removing the offset and flipping y, and ``yaw_carla = angle_sumo - 90``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def wrap_deg(angle_deg: np.ndarray | float) -> np.ndarray:
    """Angles wrapped into (-180, 180]."""
    wrapped = np.mod(np.asarray(angle_deg, dtype=np.float64) + 180.0, 360.0) - 180.0
    return np.where(wrapped == -180.0, 180.0, wrapped)


def sumo_angle_to_carla_yaw(angle_deg: np.ndarray | float) -> np.ndarray:
    """SUMO heading (clockwise from north) to CARLA yaw (clockwise from east), in (-180, 180]."""
    return wrap_deg(np.asarray(angle_deg, dtype=np.float64) - 90.0)


def carla_yaw_to_sumo_angle(yaw_deg: np.ndarray | float) -> np.ndarray:
    """CARLA yaw to SUMO heading, in [0, 360)."""
    return np.mod(np.asarray(yaw_deg, dtype=np.float64) + 90.0, 360.0)


@dataclass(frozen=True)
class SumoFrame:
    """The affine map between one SUMO network's coordinates and CARLA's world frame.

    Attributes:
        net_offset: ``(2,)`` SUMO ``location/@netOffset``, metres (network = original + offset).
    """

    net_offset: tuple[float, float] = (0.0, 0.0)

    @classmethod
    def of_network(cls, net) -> SumoFrame:
        """The frame of a sumolib network (its ``location/@netOffset``)."""
        return cls(tuple(float(v) for v in net.getLocationOffset()))

    def to_carla_xy(self, xy_sumo: np.ndarray) -> np.ndarray:
        """``(..., 2)`` SUMO network points to CARLA world points."""
        xy = np.asarray(xy_sumo, dtype=np.float64)
        out = np.empty_like(xy)
        out[..., 0] = xy[..., 0] - self.net_offset[0]
        out[..., 1] = -(xy[..., 1] - self.net_offset[1])
        return out

    def to_sumo_xy(self, xy_carla: np.ndarray) -> np.ndarray:
        """``(..., 2)`` CARLA world points to SUMO network points."""
        xy = np.asarray(xy_carla, dtype=np.float64)
        out = np.empty_like(xy)
        out[..., 0] = xy[..., 0] + self.net_offset[0]
        out[..., 1] = -xy[..., 1] + self.net_offset[1]
        return out

    def front_to_centre_carla(
        self,
        front_xy_sumo: np.ndarray,
        angle_deg: np.ndarray,
        half_length_m: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """SUMO front-bumper poses to CARLA box centres and yaws.

        Args:
            front_xy_sumo: ``(N, 2)`` front-bumper positions in the SUMO frame.
            angle_deg: ``(N,)`` SUMO headings.
            half_length_m: ``(N,)`` half vehicle lengths.

        Returns:
            ``(N, 2)`` CARLA centres and ``(N,)`` CARLA yaws in degrees.
        """
        yaw = sumo_angle_to_carla_yaw(angle_deg)
        front = self.to_carla_xy(front_xy_sumo)
        yaw_rad = np.deg2rad(yaw)
        centre = (
            front
            - np.stack([np.cos(yaw_rad), np.sin(yaw_rad)], axis=-1)
            * np.asarray(half_length_m)[..., None]
        )
        return centre, yaw

    def centre_to_front_sumo(
        self, centre_xy_carla: np.ndarray, yaw_deg: float, half_length_m: float
    ) -> tuple[float, float, float]:
        """A CARLA box centre and yaw to SUMO's front-bumper ``(x, y, angle_deg)``."""
        yaw_rad = np.deg2rad(yaw_deg)
        front = np.asarray(
            centre_xy_carla, dtype=np.float64
        ) + half_length_m * np.array([np.cos(yaw_rad), np.sin(yaw_rad)])
        x, y = self.to_sumo_xy(front)
        return float(x), float(y), float(carla_yaw_to_sumo_angle(float(yaw_deg)))

    def centre_to_front_sumo_scalar(
        self, x_m: float, y_m: float, yaw_deg: float, half_length_m: float
    ) -> tuple[float, float, float]:
        """Scalar :meth:`centre_to_front_sumo` without numpy (called every step for the ego)."""
        yaw_rad = math.radians(yaw_deg)
        front_x = x_m + half_length_m * math.cos(yaw_rad)
        front_y = y_m + half_length_m * math.sin(yaw_rad)
        return (
            front_x + self.net_offset[0],
            -front_y + self.net_offset[1],
            (yaw_deg + 90.0) % 360.0,
        )

    def velocity_to_carla(
        self, speed_mps: np.ndarray, yaw_deg: np.ndarray
    ) -> np.ndarray:
        """``(N, 2)`` CARLA world velocities of actors moving along their CARLA yaw."""
        yaw_rad = np.deg2rad(np.asarray(yaw_deg, dtype=np.float64))
        speed = np.asarray(speed_mps, dtype=np.float64)
        return np.stack([speed * np.cos(yaw_rad), speed * np.sin(yaw_rad)], axis=-1)

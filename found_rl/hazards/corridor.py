"""Which vehicles or walkers overlap the strip of route ahead of the ego's bumper."""

from __future__ import annotations

import math

import numpy as np

from found_rl.boxes import box_corner
from found_rl.hazards.geometry import route_geometry
from found_rl.hazards.results import ActorHazard
from found_rl.jit import kernel
from found_rl.world import ActorBoxes, WorldSnapshot


def actors_in_corridor(
    snapshot: WorldSnapshot,
    boxes: ActorBoxes,
    route_index: int,
    horizon_m: float,
    half_width_m: float,
) -> list[ActorHazard]:
    """Boxes overlapping the strip ``|lateral| <= half_width_m`` ahead of the bumper, nearest first.

    Each corner is placed on the route by its nearest waypoint in the searched stretch; a box
    overlaps the strip when its lateral offsets reach into ``[-half_width_m, half_width_m]``
    (corners on both sides count, so a box across the corridor is caught). See
    :func:`corridor_hazards` for the arithmetic.
    """
    route = snapshot.route
    if len(boxes) == 0 or len(route.xy) < 2:
        return []
    geometry = route_geometry(route)
    ego = snapshot.ego
    ego_x, ego_y = ego.xy.tolist()
    found = corridor_hazards(
        geometry.xy,
        geometry.direction,
        geometry.arclength_m,
        int(route_index),
        ego_x,
        ego_y,
        float(ego.half_extent[0]),
        _float64_array(boxes.xy, (len(boxes), 2)),
        _float64_array(boxes.yaw_deg, (len(boxes),)),
        _float64_array(boxes.half_extent, (len(boxes), 2)),
        _float64_array(boxes.velocity_xy, (len(boxes), 2)),
        float(horizon_m),
        float(half_width_m),
    )
    if not len(found):
        return []
    return [
        ActorHazard(index=int(k), actor_id=boxes.ids[int(k)], distance_m=gap_m, speed_along_route_mps=speed)
        for k, gap_m, speed in found.tolist()
    ]


def _float64_array(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``values`` as the C-contiguous float64 array of ``shape`` a kernel takes (no copy if it is one)."""
    return np.ascontiguousarray(values, dtype=np.float64).reshape(shape)


@kernel(
    "float64[:, ::1](float64[:, ::1], float64[:, ::1], float64[::1], int64, float64, float64, float64,"
    " float64[:, ::1], float64[::1], float64[:, ::1], float64[:, ::1], float64, float64)"
)
def corridor_hazards(
    route_xy: np.ndarray,
    route_direction: np.ndarray,
    arclength_m: np.ndarray,
    route_index: int,
    ego_x: float,
    ego_y: float,
    ego_half_length_m: float,
    box_xy: np.ndarray,
    box_yaw_deg: np.ndarray,
    box_half_extent: np.ndarray,
    box_velocity: np.ndarray,
    horizon_m: float,
    half_width_m: float,
) -> np.ndarray:
    """``(H, 3)`` rows ``(box index, gap_m, speed along the route)`` of the boxes in the corridor,
    by ascending gap (ties in box order).

    Boxes whose centre is farther from the ego than the corridor can reach are culled first.
    The route is searched from two waypoints behind ``route_index`` to the first waypoint past
    the farthest arc length a candidate can reach. Each corner (and the centre) takes the
    along/lateral coordinates of its nearest waypoint's frame (lateral > 0: right of the
    route). A box is in the corridor when its lateral extent meets ``[-half_width_m,
    half_width_m]``, its far end is ahead of the bumper and its near end within ``horizon_m``;
    the gap is from the bumper to its nearest corner, and the speed is its velocity along the
    route direction at its centre. NaN boxes are never in the corridor.
    """
    count, route_count = len(box_xy), len(arclength_m)
    reach_m = horizon_m + ego_half_length_m + half_width_m
    candidates = np.empty(count, np.int64)
    num_candidates, radius_max_m = 0, 0.0
    for k in range(count):
        radius_m = math.hypot(box_half_extent[k, 0], box_half_extent[k, 1])
        if math.hypot(box_xy[k, 0] - ego_x, box_xy[k, 1] - ego_y) <= reach_m + radius_m:
            candidates[num_candidates] = k
            num_candidates += 1
            radius_max_m = max(radius_max_m, radius_m)
    found = np.empty((num_candidates, 3))
    if num_candidates == 0:
        return found
    index = min(max(route_index, 0), route_count - 1)
    s_front = (
        arclength_m[index]
        + (ego_x - route_xy[index, 0]) * route_direction[index, 0]
        + (ego_y - route_xy[index, 1]) * route_direction[index, 1]
        + ego_half_length_m
    )
    start = min(max(route_index - 2, 0), route_count - 1)
    end = min(np.searchsorted(arclength_m, s_front + horizon_m + radius_max_m + 1.0) + 1, route_count)
    num_found = 0
    for n in range(num_candidates):
        k = candidates[n]
        x, y = box_xy[k, 0], box_xy[k, 1]
        heading = math.radians(box_yaw_deg[k])
        cos, sin = math.cos(heading), math.sin(heading)
        along_min, along_max, lateral_min, lateral_max = math.inf, -math.inf, math.inf, -math.inf
        centre_waypoint = start
        for corner in range(5):
            if corner < 4:
                px, py = box_corner(x, y, cos, sin, box_half_extent[k, 0], box_half_extent[k, 1], corner)
            else:
                px, py = x, y
            nearest, nearest_d2 = start, math.inf
            for j in range(start, end):
                dx, dy = px - route_xy[j, 0], py - route_xy[j, 1]
                d2 = dx * dx + dy * dy
                if d2 < nearest_d2:
                    nearest, nearest_d2 = j, d2
            if corner == 4:
                centre_waypoint = nearest
                continue
            dx, dy = px - route_xy[nearest, 0], py - route_xy[nearest, 1]
            ux, uy = route_direction[nearest, 0], route_direction[nearest, 1]
            along_m = arclength_m[nearest] + dx * ux + dy * uy
            lateral_m = dy * ux - dx * uy
            along_min, along_max = min(along_min, along_m), max(along_max, along_m)
            lateral_min, lateral_max = min(lateral_min, lateral_m), max(lateral_max, lateral_m)
        gap_m = along_min - s_front
        if lateral_min <= half_width_m and lateral_max >= -half_width_m and along_max >= s_front and gap_m <= horizon_m:
            found[num_found, 0] = k
            found[num_found, 1] = gap_m
            found[num_found, 2] = (
                box_velocity[k, 0] * route_direction[centre_waypoint, 0]
                + box_velocity[k, 1] * route_direction[centre_waypoint, 1]
            )
            num_found += 1
    found = found[:num_found]
    return found[np.argsort(found[:, 1], kind="mergesort")]

"""Record a town's road geometry with the real ``carla`` client, for the scripted stand-in.

The stand-in (``fake_carla``) replays what libcarla's own OpenDRIVE parser computed: lane
centrelines sampled by ``next_until_lane_end``, widths, markings, neighbours and successors.
``carla.Map(name, xodr)`` parses OpenDRIVE in the client, so no server is needed::

    pip install carla==0.9.16
    python tests/found_rl/sim/carla/record_town.py tests/found_rl/sim/carla/data/grid_town.xodr \
        tests/found_rl/sim/carla/data/grid_town.json --name GridTown

``grid_town.xodr`` was written by ``netgenerate --grid --grid.number=2 --grid.length=60
--grid.attach-length=40 --default.lanenumber=1 --default.junctions.type=traffic_light
--no-turnarounds=true --junctions.corner-detail=5 --default.junctions.radius=6`` and
``netconvert --opendrive-output``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

SAMPLE_M = 1.0


def lane_key(waypoint) -> str:
    return f"{waypoint.road_id}_{waypoint.section_id}_{waypoint.lane_id}"


def _neighbour(waypoint) -> dict | None:
    if waypoint is None:
        return None
    return {"key": lane_key(waypoint), "lane_type": str(waypoint.lane_type), "lane_id": waypoint.lane_id}


def record(xodr_path: Path, name: str) -> dict:
    import carla

    text = xodr_path.read_text(encoding="utf-8")
    town = carla.Map(name, text)
    lanes: dict[str, dict] = {}
    exits: dict[str, set[str]] = {}
    for entry, exit_ in town.get_topology():
        # A topology exit sits on the lane boundary and carries the successor's ids.
        exits.setdefault(lane_key(entry), set()).add(lane_key(exit_))
    for entry, _ in town.get_topology():
        key = lane_key(entry)
        if key in lanes:
            continue
        samples = [entry, *entry.next_until_lane_end(SAMPLE_M)]
        points = []
        for wp in samples:
            loc, yaw = wp.transform.location, wp.transform.rotation.yaw
            point = [round(loc.x, 3), round(loc.y, 3), round(yaw, 3)]
            if not points or abs(points[-1][0] - point[0]) + abs(points[-1][1] - point[1]) > 1e-3:
                points.append(point)
        lanes[key] = {
            "road_id": entry.road_id,
            "section_id": entry.section_id,
            "lane_id": entry.lane_id,
            "width": round(entry.lane_width, 3),
            "is_junction": bool(entry.is_junction),
            "lane_type": str(entry.lane_type),
            "left_marking": str(entry.left_lane_marking.type),
            "right_marking": str(entry.right_lane_marking.type),
            "left": _neighbour(entry.get_left_lane()),
            "right": _neighbour(entry.get_right_lane()),
            "successors": sorted(
                ({lane_key(wp) for wp in samples[-1].next(SAMPLE_M)} | exits[key]) - {key}
            ),
            "points": points,
        }
    return {
        "name": name,
        "xodr_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "carla_version": carla.Client("localhost", 1).get_client_version(),
        "lanes": lanes,
        "spawn_points": [
            [t.location.x, t.location.y, t.rotation.yaw] for t in town.get_spawn_points()
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("xodr", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--name", required=True)
    args = parser.parse_args()
    args.out.write_text(json.dumps(record(args.xodr, args.name), separators=(",", ":")), encoding="utf-8")


if __name__ == "__main__":
    main()

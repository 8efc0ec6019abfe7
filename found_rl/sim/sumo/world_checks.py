"""What a scenario asks for that its SUMO network cannot give: lights left out, walkers with no sidewalk.

Neither is an error (the world still runs), but a user who asked for 20 walkers on a map
without sidewalks, or trains on a town whose lights were dropped, must be told:
``found-rl scenario check`` and ``scenario show`` print these lines and the backend warns.
"""

from __future__ import annotations

from pathlib import Path

from found_rl.maps.opendrive import ImportReport
from found_rl.scenario import Scenario
from found_rl.sim.sumo.traffic import walker_capacity


def world_warnings(scenario: Scenario, net_path: Path, net) -> list[str]:
    """One line per shortfall of the network against the scenario (empty when it has none)."""
    lines = []
    report = ImportReport.load(net_path)
    if report is not None and report.unmapped:
        lines.append(
            f"map.file: {len(report.unmapped)} traffic light(s) not mapped to SUMO programs; "
            f"the map runs without them: {'; '.join(report.unmapped)}"
        )
    wanted = scenario.traffic.walkers[1]
    possible = walker_capacity(net)
    if wanted > possible:
        why = "the map has no sidewalks" if possible == 0 else "its sidewalks hold no more"
        lines.append(
            f"traffic.walkers: asks for up to {wanted} walkers, but at most {possible} can be spawned ({why})"
        )
    return lines

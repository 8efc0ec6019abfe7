"""A small hand-written OpenDRIVE town: one crossroads with CARLA-style lights and sidewalks.

CARLA's towns cannot be shipped here, so the OpenDRIVE import (lights from signals and
controllers, sidewalk lanes) is tested on this file, which follows the layout CARLA exports:
four arms with one driving lane each way, sidewalks on both sides, connecting roads inside
the junction (straight on, right and left turns), and one traffic-light signal (type
``1000001``) per approach on the connecting roads, each with its own controller.
"""

from __future__ import annotations

import math

import numpy as np

from found_rl.routes.leaderboard import RouteSpec

ARM_LENGTH_M = 60.0
JUNCTION_HALF_M = 10.0
LANE_WIDTH_M = 3.5
SIDEWALK_WIDTH_M = 2.5
JUNCTION_ID = "100"

# Arm id -> heading (rad) of the direction pointing *away* from the junction.
_ARMS = {"1": math.pi, "2": 0.0, "3": -math.pi / 2, "4": math.pi / 2}


def _lanes(sidewalks: bool, both_ways: bool = True) -> str:
    width = f'<width sOffset="0" a="{LANE_WIDTH_M}" b="0" c="0" d="0"/>'
    walk = f'<width sOffset="0" a="{SIDEWALK_WIDTH_M}" b="0" c="0" d="0"/>'
    left = right = ""
    if both_ways:
        left = f'<lane id="1" type="driving" level="false">{width}</lane>'
        if sidewalks:
            left = f'<lane id="2" type="sidewalk" level="false">{walk}</lane>' + left
    right = f'<lane id="-1" type="driving" level="false">{width}</lane>'
    if sidewalks and both_ways:
        right += f'<lane id="-2" type="sidewalk" level="false">{walk}</lane>'
    left_block = f"<left>{left}</left>" if left else ""
    return (
        f'<lanes><laneSection s="0">{left_block}<center><lane id="0" type="none" level="false"/></center>'
        f"<right>{right}</right></laneSection></lanes>"
    )


def _road(road_id: str, junction: str, geometry: str, length: float, link: str, lanes: str, signals: str = "") -> str:
    return (
        f'<road name="Road {road_id}" length="{length:.6f}" id="{road_id}" junction="{junction}">'
        f"<link>{link}</link>"
        f'<type s="0" type="town"><speed max="30" unit="km/h"/></type>'
        f"<planView>{geometry}</planView>{lanes}{signals}</road>"
    )


def _arm_start(arm: str) -> tuple[float, float, float]:
    """(x, y, hdg) of an arm's reference line start: at the junction edge, pointing away."""
    hdg = _ARMS[arm]
    return JUNCTION_HALF_M * math.cos(hdg), JUNCTION_HALF_M * math.sin(hdg), hdg


def _connector_geometry(from_arm: str, to_arm: str) -> tuple[str, float]:
    """Planview of the right-hand lane centre path from one arm into another."""
    _, _, away_in = _arm_start(from_arm)
    hdg_in = away_in + math.pi  # driving toward the junction on the arriving arm
    _, _, hdg_out = _arm_start(to_arm)
    # Reference line of the connector: the arriving arm's centre line, entering the junction.
    x0 = JUNCTION_HALF_M * math.cos(away_in)
    y0 = JUNCTION_HALF_M * math.sin(away_in)
    turn = (hdg_out - hdg_in + math.pi) % (2 * math.pi) - math.pi
    if abs(turn) < 1e-6:
        length = 2 * JUNCTION_HALF_M
        return (
            f'<geometry s="0" x="{x0:.6f}" y="{y0:.6f}" hdg="{hdg_in:.6f}" length="{length:.6f}"><line/></geometry>',
            length,
        )
    # A quarter circle whose end meets the leaving arm's centre line at the junction edge.
    radius = JUNCTION_HALF_M
    length = radius * math.pi / 2
    curvature = math.copysign(1.0 / radius, turn)
    return (
        f'<geometry s="0" x="{x0:.6f}" y="{y0:.6f}" hdg="{hdg_in:.6f}" length="{length:.6f}">'
        f'<arc curvature="{curvature:.8f}"/></geometry>',
        length,
    )


def crossroads_xodr(*, lights: bool = True, sidewalks: bool = True, controllers: bool = True,
                    stray_signal: bool = False, on_arms: bool = False) -> str:
    """The OpenDRIVE text of the crossroads town.

    Args:
        lights: put a traffic-light signal on every approach's connecting roads.
        sidewalks: give every arm a sidewalk lane on both sides.
        controllers: group each approach's signals under an OpenDRIVE ``<controller>``.
        stray_signal: add a dead-end road with a traffic light that controls no junction
            (a signal the import cannot map to a SUMO program).
        on_arms: place each approach's light head on its arm next to the junction, with a
            ``0..0`` validity and the lamp's facing as orientation, and point the connecting
            roads at it with ``<signalReference>`` (the layout of CARLA's own towns).
    """
    roads, connections = [], []
    for arm, hdg in _ARMS.items():
        x, y, _ = _arm_start(arm)
        geometry = (
            f'<geometry s="0" x="{x:.6f}" y="{y:.6f}" hdg="{hdg:.6f}" length="{ARM_LENGTH_M}"><line/></geometry>'
        )
        link = f'<predecessor elementType="junction" elementId="{JUNCTION_ID}"/>'
        head = ""
        if lights and on_arms:
            head = (
                f'<signals><signal s="2" t="6" id="{arm}000" name="Signal_3Light_Post01" dynamic="yes" '
                f'orientation="-" zOffset="0" country="OpenDRIVE" type="1000001" subtype="-1" value="-1">'
                f'<validity fromLane="0" toLane="0"/></signal></signals>'
            )
        roads.append(_road(arm, "-1", geometry, ARM_LENGTH_M, link, _lanes(sidewalks), head))
    signal_ids: dict[str, list[str]] = {}
    connector = 200
    for from_arm in _ARMS:
        for to_arm in _ARMS:
            if from_arm == to_arm:
                continue
            connector += 1
            geometry, length = _connector_geometry(from_arm, to_arm)
            link = (
                f'<predecessor elementType="road" elementId="{from_arm}" contactPoint="start"/>'
                f'<successor elementType="road" elementId="{to_arm}" contactPoint="start"/>'
            )
            signals = ""
            if lights and on_arms:
                signal_ids[from_arm] = [f"{from_arm}000"]
                signals = f'<signals><signalReference s="0.5" t="-3" id="{from_arm}000" orientation="+"/></signals>'
            elif lights:
                signal_id = f"{connector}0"
                signal_ids.setdefault(from_arm, []).append(signal_id)
                signals = (
                    f'<signals><signal s="0.5" t="-3" id="{signal_id}" name="Signal_3Light_Post01" dynamic="yes" '
                    f'orientation="+" zOffset="0" country="OpenDRIVE" type="1000001" subtype="-1" value="-1" '
                    f'height="1" width="0.5"><validity fromLane="-1" toLane="-1"/></signal></signals>'
                )
            roads.append(
                _road(str(connector), JUNCTION_ID, geometry, length, link, _lanes(False, both_ways=False), signals)
            )
            # Traffic toward the junction drives on lane 1 of the arriving arm (its left side).
            connections.append(
                f'<connection id="{connector}" incomingRoad="{from_arm}" connectingRoad="{connector}" '
                f'contactPoint="start"><laneLink from="1" to="-1"/></connection>'
            )
    extra = ""
    if stray_signal:
        geometry = f'<geometry s="0" x="-200" y="-200" hdg="0" length="{ARM_LENGTH_M}"><line/></geometry>'
        extra = _road(
            "9", "-1", geometry, ARM_LENGTH_M, "", _lanes(False),
            '<signals><signal s="50" t="-3" id="900" name="Signal_3Light_Post01" dynamic="yes" orientation="+" '
            'zOffset="0" country="OpenDRIVE" type="1000001" subtype="-1" value="-1">'
            '<validity fromLane="-1" toLane="-1"/></signal></signals>',
        )
        signal_ids.setdefault("9", []).append("900")
    controller_xml = junction_controllers = ""
    if lights and controllers:
        for index, (arm, ids) in enumerate(sorted(signal_ids.items())):
            controls = "".join(f'<control signalId="{s}" type="0"/>' for s in ids)
            controller_xml += f'<controller id="{index + 1}" name="approach {arm}" sequence="0">{controls}</controller>'
            if arm != "9":
                junction_controllers += f'<controller id="{index + 1}" type="0" sequence="{index}"/>'
    header = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<OpenDRIVE><header revMajor="1" revMinor="4" name="crossroads" '
        'version="1" north="80" south="-80" east="80" west="-80" vendor="found-rl"/>'
    )
    junction = f'<junction id="{JUNCTION_ID}" name="crossroads">{"".join(connections)}{junction_controllers}</junction>'
    return header + "".join(roads) + extra + controller_xml + junction + "</OpenDRIVE>\n"


def crossroads_routes(town: str = "crossroads", reach_m: float = 50.0) -> list[RouteSpec]:
    """Every movement through the crossroads (12: straight on, left and right from each arm).

    Waypoints are in CARLA's frame (y = -OpenDRIVE y), ``reach_m`` from the centre, on the
    arriving lane of one arm and the leaving lane of another.
    """
    half = LANE_WIDTH_M / 2.0
    specs = []
    for from_arm, from_hdg in _ARMS.items():
        # Arriving traffic keeps to the left of the arm's direction away from the junction.
        arrive = reach_m * np.array([math.cos(from_hdg), math.sin(from_hdg)]) + half * np.array(
            [-math.sin(from_hdg), math.cos(from_hdg)]
        )
        for to_arm, to_hdg in _ARMS.items():
            if to_arm == from_arm:
                continue
            leave = reach_m * np.array([math.cos(to_hdg), math.sin(to_hdg)]) + half * np.array(
                [math.sin(to_hdg), -math.cos(to_hdg)]
            )
            points = np.stack([arrive, leave]) * np.array([1.0, -1.0])  # OpenDRIVE -> CARLA
            specs.append(RouteSpec(str(len(specs)), town, np.round(points, 2) + 0.0))
    return specs

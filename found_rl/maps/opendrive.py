"""Importing an OpenDRIVE map (a CARLA town) as a SUMO network: its traffic lights and sidewalks.

netconvert's own signal import misses most of CARLA's lights: CARLA places a light's head on
a side road or an arm near the junction (often with a ``0..0`` lane validity and the lamp's
facing as orientation) and points the junction's connecting roads at it with
``<signalReference>``. So, as CARLA's co-simulation conversion does, netconvert's loaded
lights are discarded and every junction that one of CARLA's traffic lights (type
``1000001``) governs gets a SUMO program: a signal or signal reference on a connecting road
governs that road's junction, one on an ordinary road the junction at its nearer end, and a
junction that lists an OpenDRIVE ``<controller>`` is signalised. The program gives each
incoming road green in turn (``--tls.layout incoming``: CARLA's lights of one junction
cycle through its approaches), 10 s green and 3 s yellow as CARLA's defaults; both can be
changed with ``map.netconvert_options``.

Sidewalk lanes are kept (SUMO's OpenDRIVE pedestrian lane types) and crossings and walking
areas are guessed at junctions, so walkers can be spawned on an imported town.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path

from found_rl.errors import UserError

TRAFFIC_LIGHT_TYPE = "1000001"
GREEN_S = 10
YELLOW_S = 3
REPORT_FILE = "opendrive_import.json"


@dataclass(frozen=True)
class SignalPlan:
    """Which OpenDRIVE junctions get a SUMO traffic light, and which lights could not be placed.

    Attributes:
        junctions: OpenDRIVE junction ids to signalise (SUMO node ids are the same).
        unmapped: one line per traffic light that governs no junction, naming it and why.
    """

    junctions: tuple[str, ...]
    unmapped: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImportReport:
    """What an OpenDRIVE import produced; saved beside the cached network.

    Attributes:
        traffic_lights: SUMO traffic-light ids built from the map's signals.
        unmapped: lights that could not be turned into SUMO programs (the network is used
            without them).
        sidewalk_lanes: sidewalk lanes kept from the map.
        crossings: pedestrian crossings guessed at junctions.
    """

    traffic_lights: tuple[str, ...] = ()
    unmapped: tuple[str, ...] = ()
    sidewalk_lanes: int = 0
    crossings: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @staticmethod
    def load(net_path: Path) -> ImportReport | None:
        """The report saved beside ``net_path``, or None for networks not imported from OpenDRIVE."""
        path = Path(net_path).parent / REPORT_FILE
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        return ImportReport(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def _nearer_junction(road: ET.Element, s_m: float) -> str | None:
    """The junction at the end of ``road`` nearer to ``s_m`` (the other end if only it is one)."""
    link = road.find("link")
    ends = {}
    for end in ("predecessor", "successor"):
        element = link.find(end) if link is not None else None
        if element is not None and element.get("elementType") == "junction":
            ends[end] = element.get("elementId")
    if not ends:
        return None
    length = float(road.get("length", "0") or 0.0)
    nearer = "successor" if s_m >= length / 2.0 else "predecessor"
    return ends.get(nearer) or next(iter(ends.values()))


def read_signal_plan(xodr_path: Path) -> SignalPlan:
    """The junctions the map's traffic lights govern (see the module docstring).

    Raises:
        ValueError: the file is not XML (netconvert would fail on it too).
    """
    try:
        root = ET.parse(xodr_path).getroot()
    except ET.ParseError as exc:
        raise UserError(f"{xodr_path}: not a readable OpenDRIVE file: {exc}") from None
    light_ids = {
        s.get("id")
        for s in root.iter("signal")
        if s.get("type") == TRAFFIC_LIGHT_TYPE
    }
    junctions: dict[str, None] = {}
    placed: dict[str, bool] = dict.fromkeys(sorted(light_ids - {None}), False)
    where: dict[str, str] = {}
    for road in root.iter("road"):
        road_id = road.get("id", "?")
        in_junction = road.get("junction", "-1") not in ("-1", "")
        signals = road.find("signals")
        if signals is None:
            continue
        for element in signals:
            if element.tag not in ("signal", "signalReference"):
                continue
            signal_id = element.get("id")
            if signal_id not in placed:
                continue
            where.setdefault(signal_id, road_id)
            s_m = float(element.get("s", "0") or 0.0)
            junction = road.get("junction") if in_junction else _nearer_junction(road, s_m)
            if junction is not None:
                junctions[junction] = None
                placed[signal_id] = True
    for junction in root.iter("junction"):
        if junction.find("controller") is not None:
            junctions[junction.get("id")] = None
    unmapped = tuple(
        f"traffic light {signal_id} on road {where.get(signal_id, '?')}: the road reaches no junction"
        for signal_id, ok in placed.items()
        if not ok
    )
    return SignalPlan(tuple(junctions), unmapped)


def _type_files() -> str:
    import sumo

    typemap = Path(sumo.SUMO_HOME) / "data" / "typemap"
    return ",".join(
        str(typemap / name)
        for name in ("opendriveNetconvert.typ.xml", "opendriveNetconvertPedestrians.typ.xml")
    )


def _option_name(flag: str) -> str:
    return flag.split("=", 1)[0]


def netconvert_args(plan: SignalPlan, user_options: tuple[str, ...]) -> list[str]:
    """netconvert flags for an OpenDRIVE import (the user's ``netconvert_options`` win).

    netconvert refuses an option given twice, so a default the user also sets is left out.
    """
    given = {_option_name(flag) for flag in user_options if flag.startswith("--")}
    defaults = [
        f"--type-files={_type_files()}",
        "--crossings.guess=true",
        "--walkingareas=true",
        "--tls.discard-loaded=true",
        "--tls.layout=incoming",
        f"--tls.green.time={GREEN_S}",
        f"--tls.yellow.time={YELLOW_S}",
        "--no-warnings=true",
    ]
    if plan.junctions:
        defaults.append(f"--tls.set={','.join(plan.junctions)}")
    return [flag for flag in defaults if _option_name(flag) not in given] + list(user_options)


_TLS = re.compile(r'<tlLogic id="([^"]+)"')
_SIDEWALK = re.compile(r'<lane id="[^":][^"]*"[^>]*type="sidewalk"')
_CROSSING = re.compile(r'<edge id="[^"]+" function="crossing"')


def import_report(plan: SignalPlan, net_path: Path) -> ImportReport:
    """Compare the built network with the plan: signalised junctions SUMO could not build."""
    text = Path(net_path).read_text(encoding="utf-8")
    built = set(_TLS.findall(text))
    missing = tuple(
        f"junction {junction}: netconvert built no traffic light there (no such SUMO junction)"
        for junction in plan.junctions
        if junction not in built
    )
    return ImportReport(
        traffic_lights=tuple(sorted(built)),
        unmapped=plan.unmapped + missing,
        sidewalk_lanes=len(_SIDEWALK.findall(text)),
        crossings=len(_CROSSING.findall(text)),
    )

"""SUMO networks of the kinds users bring, built small with netgenerate and netconvert.

Each builder writes ``<name>.net.xml`` into a folder and returns its path. Together they cover
what a fixed-time grid does not: actuated and delay-based programs, guessed lights, rail
signals and rail crossings (links signalled by trains, or by nothing), a light running the
second of two programs, a program for a light without links, the junction types netconvert
writes, and a real OpenStreetMap import.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

DATA = Path(__file__).parent / "data"
GRID = ["--grid", "--grid.number=2", "--grid.length=70", "--grid.attach-length=40", "--no-turnarounds"]


def _run(tool: str, *args: str) -> None:
    import sumolib

    subprocess.run([sumolib.checkBinary(tool), *args], check=True, capture_output=True, text=True)


def _netgenerate(*flags: str) -> Callable[[Path], None]:
    return lambda out: _run("netgenerate", *GRID, *flags, f"--output-file={out}")


def _plain_xml(nodes: str, edges: str, *flags: str) -> Callable[[Path], None]:
    """netconvert from hand-written ``.nod.xml`` and ``.edg.xml`` text."""

    def build(out: Path) -> None:
        node_file, edge_file = out.with_suffix(".nod.xml"), out.with_suffix(".edg.xml")
        node_file.write_text(f"<nodes>\n{nodes}</nodes>\n")
        edge_file.write_text(f"<edges>\n{edges}</edges>\n")
        _run("netconvert", f"--node-files={node_file}", f"--edge-files={edge_file}", "--no-turnarounds",
             *flags, f"--output-file={out}")  # fmt: skip

    return build


def _two_way(*pairs: str, lanes: int = 1) -> str:
    return "".join(
        f'  <edge id="{a}{b}" from="{a}" to="{b}" numLanes="{lanes}" speed="13.9"/>\n'
        f'  <edge id="{b}{a}" from="{b}" to="{a}" numLanes="{lanes}" speed="13.9"/>\n'
        for a, b in pairs
    )


def _with_logic(logic_of: Callable[[str], str]) -> Callable[[Path], None]:
    """A fixed-time grid with ``logic_of(net_text)`` (tlLogic elements) added after the last program."""

    def build(out: Path) -> None:
        _netgenerate("--default.junctions.type=traffic_light")(out)
        text = out.read_text()
        end = text.rindex("</tlLogic>") + len("</tlLogic>\n")
        out.write_text(text[:end] + logic_of(text) + text[end:])

    return build


def _second_program(text: str) -> str:
    """Program ``evening`` for light A1, loaded last, so SUMO runs it; its states are two links longer."""
    start = text.index('<tlLogic id="A1"')
    links = len(text[start:].split('state="', 1)[1].split('"', 1)[0])
    green, red = "G" * (links // 2) + "r" * (links - links // 2), "r" * (links // 2) + "G" * (links - links // 2)
    return (
        '    <tlLogic id="A1" type="static" programID="evening" offset="0">\n'
        f'        <phase duration="20" state="{green}rr"/>\n'
        f'        <phase duration="3"  state="{"y" * (links // 2)}{"r" * (links - links // 2)}rr"/>\n'
        f'        <phase duration="20" state="{red}rr"/>\n'
        f'        <phase duration="3"  state="{"r" * (links // 2)}{"y" * (links - links // 2)}rr"/>\n'
        "    </tlLogic>\n"
    )


def _lonely_program(_: str) -> str:
    """A program for a light no connection refers to."""
    return (
        '    <tlLogic id="nowhere" type="static" programID="0" offset="0">\n'
        '        <phase duration="20" state="G"/>\n        <phase duration="20" state="r"/>\n'
        "    </tlLogic>\n"
    )


RAIL_NODES = """\
  <node id="W" x="-100" y="0" type="priority"/>
  <node id="C" x="0" y="0" type="rail_crossing"/>
  <node id="E" x="100" y="0" type="priority"/>
  <node id="S" x="0" y="-100" type="priority"/>
  <node id="RS" x="0" y="50" type="rail_signal"/>
  <node id="N" x="0" y="150" type="priority"/>
"""
RAIL_EDGES = _two_way("WC", "CE") + """\
  <edge id="SC" from="S" to="C" speed="20" allow="rail"/>
  <edge id="CRS" from="C" to="RS" speed="20" allow="rail"/>
  <edge id="RSN" from="RS" to="N" speed="20" allow="rail"/>
"""
# Every junction type netconvert writes for road networks, on a 3 x 3 grid with a dead end.
TYPED_NODES = """\
  <node id="a" x="0" y="0" type="right_before_left"/>
  <node id="b" x="100" y="0" type="traffic_light_right_on_red"/>
  <node id="c" x="200" y="0" type="allway_stop"/>
  <node id="d" x="0" y="100" type="priority_stop"/>
  <node id="e" x="100" y="100" type="traffic_light_unregulated"/>
  <node id="f" x="200" y="100" type="left_before_right"/>
  <node id="g" x="0" y="200" type="unregulated"/>
  <node id="h" x="100" y="200" type="zipper"/>
  <node id="i" x="200" y="200" type="priority"/>
  <node id="j" x="100" y="280" type="dead_end"/>
"""
TYPED_EDGES = _two_way("ab", "bc", "de", "ef", "gh", "hi", "ad", "dg", "be", "eh", "cf", "fi", "hj")
# The options SUMO's own OpenStreetMap wizard passes to netconvert.
OSM_OPTIONS = (
    "--geometry.remove", "--roundabouts.guess", "--ramps.guess", "--junctions.join", "--tls.guess-signals",
    "--tls.discard-simple", "--tls.join", "--tls.default-type=actuated", "--sidewalks.guess", "--crossings.guess",
)  # fmt: skip


def _osm(out: Path) -> None:
    _run("netconvert", f"--osm-files={DATA / 'tiny_city.osm'}", *OSM_OPTIONS, f"--output-file={out}")


BUILDERS: dict[str, Callable[[Path], None]] = {
    "actuated": _netgenerate("--default.junctions.type=traffic_light", "--tls.default-type=actuated"),
    "delay_based": _netgenerate("--default.junctions.type=traffic_light", "--tls.default-type=delay_based"),
    "guessed": _netgenerate("--tls.guess", "--tls.guess.threshold=20", "--tls.default-type=actuated"),
    "rail": _plain_xml(RAIL_NODES, RAIL_EDGES),
    "two_programs": _with_logic(_second_program),
    "light_without_links": _with_logic(_lonely_program),
    "junction_types": _plain_xml(TYPED_NODES, TYPED_EDGES, "--sidewalks.guess", "--crossings.guess"),
    "osm": _osm,
}


def build(name: str, folder: Path) -> Path:
    """Build network ``name`` of :data:`BUILDERS` into ``folder``."""
    out = folder / f"{name}.net.xml"
    BUILDERS[name](out)
    return out

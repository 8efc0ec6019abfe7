"""A town's identity: a content hash of its built road network's lanes, junctions and connections.

Two scenarios drive the same town when their built networks have the same roads, whatever the
spec that built them: a copied or renamed ``.net.xml``, an OpenDRIVE map under other
``netconvert_options`` (signal timing), the same generator parameters in two files. The bytes
of a ``.net.xml`` do not tell this: netconvert writes its input path, options and date into the
file's header, and a signal plan is no road. So the identity hashes only what a driver meets:

- every edge (id, function, from and to junction) and lane (id, index, permissions, speed,
  length, width, shape);
- every junction (id, type, position, incoming and internal lanes, shape);
- every connection (lanes joined, via lane, direction);
- the network's offset (where its coordinates sit in the world frame route files are written in).

Anything else (the header, ``<tlLogic>`` programs, ``<request>`` foes, parameters) is left out.

Identities are versioned (``roads-v1:...``): a dataset or a card that recorded a hash of another
definition (the file-byte hashes found-rl recorded before, 20 bare hex digits) is never compared
with one of this definition as if they could match (:func:`comparable`).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from pathlib import Path

from found_rl.atomic import replaced_atomically
from found_rl.maps.build import build_network, cache_root
from found_rl.scenario import Scenario

IDENTITY_VERSION = 1
"""Bumped when what the hash covers changes; old identities then stop matching new ones openly."""
PREFIX = f"roads-v{IDENTITY_VERSION}:"
CARLA_PREFIX = "carla-town:"
"""A CARLA server's own town (``map.town``): its network lives in the server, so the name is all."""

_RECORDED = {
    "location": ("netOffset",),
    "edge": ("id", "function", "from", "to"),
    "lane": ("id", "index", "allow", "disallow", "speed", "length", "width", "shape"),
    "junction": ("id", "type", "x", "y", "incLanes", "intLanes", "shape"),
    "connection": ("from", "to", "fromLane", "toLane", "via", "dir"),
}
_LEGACY = re.compile(r"^[0-9a-f]{20}$")


def network_identity(net_path: str | Path) -> str:
    """The identity (``roads-v1:<20 hex>``) of a compiled SUMO network (``.net.xml`` or ``.gz``).

    Cached on disk by the file's bytes, so a large network is parsed once per machine.

    Raises:
        ValueError: the file is not a SUMO network (names the file).
    """
    net_path = Path(net_path)
    data = net_path.read_bytes()
    cache_file = cache_root() / "network-ids" / f"{hashlib.sha256(data).hexdigest()[:32]}-v{IDENTITY_VERSION}.txt"
    if cache_file.is_file():
        cached = cache_file.read_text().strip()
        if cached.startswith(PREFIX):
            return cached
    identity = PREFIX + roads_digest(_records(net_path, data))
    with replaced_atomically(cache_file) as tmp:
        tmp.write_text(identity + "\n")
    return identity


def roads_digest(records: Iterable[tuple[str, ...]]) -> str:
    """20 hex digits of SHA-256 over the records, in sorted order (file order does not matter)."""
    digest = hashlib.sha256()
    for line in sorted(json.dumps(record) for record in records):
        digest.update(line.encode())
        digest.update(b"\n")
    return digest.hexdigest()[:20]


def _records(net_path: Path, data: bytes) -> Iterator[tuple[str, ...]]:
    """One tuple of attribute values per recorded element (a lane names its edge by its id)."""
    from io import BytesIO

    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        for _, element in ET.iterparse(BytesIO(data), events=("end",)):
            keys = _RECORDED.get(element.tag)
            if keys is not None:
                yield (element.tag, *(element.get(key, "") for key in keys))
            if element.tag in ("edge", "junction", "tlLogic"):
                element.clear()  # keep memory flat on city-sized networks
    except ET.ParseError as exc:
        raise ValueError(f"{net_path}: not a SUMO network (XML error: {exc})") from None


def scenario_network(scenario: Scenario) -> str:
    """The identity of the town a scenario drives: its built network's, or a CARLA town's name.

    An OpenDRIVE map is built the way the SUMO backend builds it, so the same ``.xodr`` is the
    same town on either backend.

    Raises:
        UserError: the network cannot be built (netgenerate's or netconvert's message).
    """
    if scenario.map.town is not None:
        return CARLA_PREFIX + scenario.map.town
    return network_identity(build_network(scenario.map))


def comparable(a: str, b: str) -> bool:
    """Whether two identities follow one definition, so that unequal means different roads.

    A CARLA town's name compares with anything current: unequal is another town (a CARLA town
    named without its OpenDRIVE file is known by its name alone).
    """
    return (is_current(a) and is_current(b)) or _definition(a) == _definition(b)


def is_current(identity: str) -> bool:
    """An identity of this definition (or a CARLA town's name), not one recorded under another."""
    return identity.startswith((PREFIX, CARLA_PREFIX))


def _definition(identity: str) -> str:
    if identity.startswith(CARLA_PREFIX):
        return CARLA_PREFIX
    if _LEGACY.match(identity):
        return "file-bytes"
    return identity.split(":", 1)[0] if ":" in identity else "unknown"

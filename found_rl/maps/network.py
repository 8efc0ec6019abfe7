"""Reading a compiled SUMO network with sumolib."""

from __future__ import annotations

from pathlib import Path
from xml.sax import SAXException

from found_rl.errors import UserError


def read_network(net_path: str | Path):
    """The sumolib net with internal (junction) lanes and pedestrian connections."""
    import warnings

    import sumolib

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Module 'rtree' not available")
            return sumolib.net.readNet(
                str(net_path), withInternal=True, withPedestrianConnections=True
            )
    except (
        SAXException,
        OSError,
        KeyError,
        AttributeError,
        TypeError,
        ValueError,
    ) as exc:  # sumolib's parse errors
        raise UserError(f"{net_path}: not a readable SUMO network: {exc}") from None

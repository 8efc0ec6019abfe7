"""The towns a dataset is collected in, and how its steps spread over them and the workers.

A sample records its town so that a model trained on several towns can be scored per town,
and a town never driven in training can be told apart from one that was: ``town`` is the
scenario file's stem (readable), ``network`` the identity of its built road network
(:func:`found_rl.maps.identity.scenario_network`: the same roads under two specs or file names
are the same network), or the CARLA town's name for a ``map.town`` scenario, whose network
lives in the server.
"""

from __future__ import annotations

import itertools
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from found_rl.errors import UserError
from found_rl.scenario import Scenario


@dataclass(frozen=True)
class Town:
    """One scenario to collect in.

    Attributes:
        name: the scenario file's stem (``small_grid``).
        network: identity of the built road network (``roads-v1:...``), or ``carla-town:NAME``.
        scenario: the validated scenario.
    """

    name: str
    network: str
    scenario: Scenario


@dataclass(frozen=True)
class Segment:
    """A stretch of one worker's collection: ``steps`` samples in ``towns[town]``."""

    town: int
    steps: int


def load_town(path: Path, scenario: Scenario) -> Town:
    """The town of ``scenario`` (read from ``path``), refused if it cannot be collected here.

    Raises:
        UserError: a CARLA scenario without a reachable server, or a map that does not build;
            the message names ``path``.
    """
    if scenario.backend == "carla":
        _check_carla_server(path)
    from found_rl.maps import scenario_network

    try:
        network = scenario_network(scenario)
    except UserError as exc:
        raise UserError(f"--scenario {path}: {exc}") from None
    return Town(path.stem, network, scenario)


def _check_carla_server(path: Path) -> None:
    """A CARLA scenario needs a running server named by ``$FOUND_RL_CARLA``; the collection
    would otherwise start and only fail in a worker, minutes later."""
    from found_rl.sim.carla.connection import ENDPOINT_ENV, endpoint_from_env

    if not os.environ.get(ENDPOINT_ENV):
        raise UserError(
            f"--scenario {path}: backend: carla needs a CARLA server, and none is configured "
            f"(${ENDPOINT_ENV} is not set); start one with `found-rl carla up` and export what it prints"
        )
    endpoint = endpoint_from_env()
    try:
        with socket.create_connection((endpoint.host, endpoint.port), timeout=5.0):
            pass
    except OSError as exc:
        raise UserError(
            f"--scenario {path}: backend: carla needs a CARLA server; none answers at "
            f"{endpoint.address} (${ENDPOINT_ENV}) ({exc})"
        ) from None


def even_shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` as equal as possible, the first ones one more."""
    base, extra = divmod(total, parts)
    return [base + int(index < extra) for index in range(parts)]


def plan_segments(steps: int, num_towns: int, workers: int) -> list[list[Segment]]:
    """Which worker collects how many steps in which town.

    The steps are split evenly over the towns (in the order given), the towns are laid end to
    end, and that line is cut into the workers' even shares: worker 0 takes the first stretch,
    and so on. Every worker does the same work, a town is driven by as few workers as the
    split allows, and the plan depends only on the three numbers.

    Returns:
        Per worker, its segments in order (empty for a worker with no steps).
    """
    town_bounds = _bounds(even_shares(steps, num_towns))
    plan: list[list[Segment]] = []
    for start, end in _bounds(even_shares(steps, workers)):
        overlaps = [min(end, town_end) - max(start, town_start) for town_start, town_end in town_bounds]
        plan.append([Segment(town, overlap) for town, overlap in enumerate(overlaps) if overlap > 0])
    return plan


def _bounds(shares: list[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of each share laid end to end."""
    ends = list(itertools.accumulate(shares))
    return list(zip([0, *ends[:-1]], ends, strict=True))

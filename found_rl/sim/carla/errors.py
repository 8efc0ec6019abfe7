"""Errors of the CARLA backend and its server supervisor."""

from __future__ import annotations

from fast_sampler.errors import EnvLostError
from found_rl.errors import UserError


class CarlaSetupError(UserError):
    """Something the user set up or wrote is wrong: no server on the port, a version mismatch,
    an unknown town, a route off the map, a port range in use, a bad ``CARLA_ROOT``.

    A :class:`~found_rl.errors.UserError`, so the CLI prints it on one line and exits 2.
    """


class CarlaServerLost(EnvLostError):
    """The server died or stopped answering ticks mid-episode.

    When the backend supervises its server, the server has been restarted and the world
    rebuilt by the time this is raised: the step is lost, and the next ``reset`` works.
    """

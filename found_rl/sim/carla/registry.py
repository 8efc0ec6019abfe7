"""The file listing the CARLA servers ``found-rl carla up`` started, so ``down``/``status`` find them.

Entries identify a process by PID and start time; the file is rewritten atomically.
"""

from __future__ import annotations

import json
from pathlib import Path

from found_rl.atomic import replaced_atomically
from found_rl.errors import UserError
from found_rl.maps.build import cache_root
from found_rl.sim.carla.supervisor import ServerRecord


def default_registry() -> Path:
    """``$FOUND_RL_CACHE/carla/servers.json``."""
    return cache_root() / "carla" / "servers.json"


def read_registry(path: Path) -> list[ServerRecord]:
    """The recorded servers (none if the file does not exist).

    Raises:
        ValueError: the file is not a registry written by found-rl (named).
    """
    if not path.is_file():
        return []
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
        return [ServerRecord(**entry) for entry in entries]
    except (json.JSONDecodeError, TypeError, UnicodeDecodeError) as exc:
        raise UserError(
            f"{path}: not a found-rl CARLA server registry ({exc}); delete it or pass --registry"
        ) from None


def write_registry(path: Path, records: list[ServerRecord]) -> None:
    with replaced_atomically(path) as tmp:
        tmp.write_text(json.dumps([r.to_json() for r in records], indent=1), encoding="utf-8")

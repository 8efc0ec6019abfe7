"""A tiny signalised grid town shared by the SUMO tests (built once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

TINY_TOWN = {
    "description": "2x2 test town",
    "map": {
        "generate": {
            "type": "grid",
            "junctions": 2,
            "block_length_m": 70,
            "attach_length_m": 40,
        }
    },
    "routes": {"random_length_m": 120},
    "traffic": {"vehicles": [6, 10], "walkers": [4, 6], "warmup_s": 10},
    "episode": {"max_steps": 200},
}


@pytest.fixture(scope="session")
def write_scenario(tmp_path_factory: pytest.TempPathFactory):
    """Write a scenario (TINY_TOWN updated with ``changes``) and return its path."""
    folder = tmp_path_factory.mktemp("scenarios")
    count = iter(range(10**6))

    def write(changes: dict | None = None, name: str | None = None) -> Path:
        data = {**TINY_TOWN, **(changes or {})}
        path = folder / (name or f"scenario{next(count)}.yaml")
        path.write_text(yaml.safe_dump(data))
        return path

    return write

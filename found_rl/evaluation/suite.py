"""Evaluation suites: several towns, each with its own leaderboard route file, scored as one.

A suite file (``scenarios/suites/NAME.yaml``) lists scenario files, each a town with a route
file of its own; every route is driven ``repetitions`` times under other traffic, and tables give
each town's mean and the suite's route-weighted mean with a 95 % bootstrap interval
(:mod:`found_rl.evaluation.intervals`). ``found-rl eval --suite FILE`` and a run config's
``evaluation.suite`` read the same file::

    description: six towns of five kinds that the quickstart never trains on
    repetitions: 3                  # traffic seeds per route
    seed: 0                         # base seed of the episodes
    towns:
      - scenario: ../heldout_town.yaml
        kind: grid                  # a label for the tables (default: from the map)
      - scenario: ../ingolstadt.yaml
        kind: real-world (OpenStreetMap)
        name: ingolstadt            # default: the scenario file's stem

Paths are relative to the suite file. Errors name the suite file and the field
(``towns[2].scenario``), and a town's own scenario errors are quoted with its file and field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from found_rl.errors import UserError
from found_rl.scenario import Scenario, format_field_error, load_scenario, read_yaml_file


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SuiteTownConfig(_Strict):
    """One town of a suite, as written."""

    scenario: Path = Field(description="the town's scenario file (with its own routes.file)")
    name: str | None = Field(None, min_length=1, pattern=r"^[A-Za-z0-9_.-]+$",
                             description="the town's name in tables and file names (default: the scenario's stem)")
    kind: str | None = Field(None, min_length=1, description="a label for the tables (default: from the map)")

    @property
    def town_name(self) -> str:
        return self.name or self.scenario.name.removesuffix(".yaml").removesuffix(".yml")


class SuiteConfig(_Strict):
    """A suite file, as written."""

    description: str = ""
    towns: list[SuiteTownConfig] = Field(min_length=1)
    repetitions: int = Field(3, ge=1, le=100, description="episodes per route, each under other traffic")
    seed: int = Field(0, ge=0, description="base seed of the episodes")

    @model_validator(mode="after")
    def _names_differ(self) -> SuiteConfig:
        names = [town.town_name for town in self.towns]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"towns: the name(s) {repeated} are given twice; give each town its own name")
        return self


@dataclass(frozen=True)
class SuiteTown:
    """A town of a loaded suite: its validated scenario, whose ``routes.file`` it is scored on."""

    name: str
    kind: str
    scenario_path: Path
    scenario: Scenario


@dataclass(frozen=True)
class Suite:
    """A loaded suite (see the module docstring)."""

    path: Path
    description: str
    towns: tuple[SuiteTown, ...]
    repetitions: int
    seed: int


def map_kind(scenario: Scenario) -> str:
    """A short label of the map's kind: the generator's type, OpenDRIVE or a SUMO network file."""
    if scenario.map.generate is not None:
        return scenario.map.generate.type
    if scenario.map.town is not None:
        return "CARLA town"
    return "OpenDRIVE" if scenario.map.file.suffix == ".xodr" else "SUMO network"


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file and every town's scenario.

    Raises:
        FileNotFoundError: the suite file does not exist.
        UserError: malformed YAML, an invalid field, a town whose scenario is missing or invalid,
            or one without a route file of its own; each names the suite file and the field.
    """
    path = Path(path)
    config = parse_suite(read_yaml_file(path, "suite"), source=str(path))
    towns = tuple(_load_town(path, index, town) for index, town in enumerate(config.towns))
    return Suite(path.resolve(), config.description, towns, config.repetitions, config.seed)


def parse_suite(data: Any, *, source: str) -> SuiteConfig:
    """Validate already-parsed YAML; errors name ``source`` and the field."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping of suite fields (towns, repetitions, ...), "
                        f"got {type(data).__name__}")
    try:
        return SuiteConfig.model_validate(data)
    except ValidationError as exc:
        lines = (format_field_error(source, data, error) for error in exc.errors())
        raise UserError("\n".join(line.replace(": (top level): ", ": ", 1) for line in lines)) from None


def _load_town(suite_path: Path, index: int, town: SuiteTownConfig) -> SuiteTown:
    field = f"{suite_path}: towns[{index}].scenario"
    scenario_path = town.scenario if town.scenario.is_absolute() else suite_path.parent / town.scenario
    if not scenario_path.is_file():
        raise UserError(f"{field}: no such scenario file: {scenario_path}")
    try:
        scenario = load_scenario(scenario_path)
    except UserError as exc:
        raise UserError(f"{field}: {exc}") from None
    if scenario.routes.file is None:
        raise UserError(f"{field}: {scenario_path} has random routes; a suite town needs a route file of its own "
                        "(write one with `found-rl scenario routes` and set routes.file)")
    if scenario.backend != "sumo":
        raise UserError(f"{field}: {scenario_path} uses backend: {scenario.backend}; suite towns run on the "
                        "embedded SUMO backend (evaluate a CARLA town with --scenario)")
    return SuiteTown(town.town_name, town.kind or map_kind(scenario), scenario_path.resolve(), scenario)

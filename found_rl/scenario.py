"""Scenario files: the YAML a user writes to choose a map, routes, traffic and episode rules.

A scenario is validated once, here, so every later stage can trust it (ARCHITECTURE §8).
Relative paths inside a scenario are resolved against the scenario file's folder.

Example::

    backend: sumo
    map:
      generate: {type: grid, junctions: 3, block_length_m: 80}
    routes:
      random_length_m: 250
    traffic: {vehicles: [10, 20], walkers: 10}
    episode: {max_steps: 600}
    seed: 0
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from found_rl.errors import MissingPathError, UserError
from found_rl.package_files import is_package_path, resolve_package_path

NETWORK_SUFFIXES = (".net.xml", ".net.xml.gz", ".xodr")

RUN_CONFIG_FIELDS = frozenset({
    "scenario", "algorithm", "network", "device", "torch_threads", "seed", "budget", "sampler", "learner",
    "guidance", "advisor", "evaluation", "checkpoint", "resources",
})
"""The top-level fields of a run config (``found_rl.train.config.RunConfig``, which sits levels
above this module; a test keeps the two equal). A file passed as a scenario is recognised as a
run config by them, so the error says which file it is and names its scenarios."""


def _count_range(value: Any) -> tuple[int, int]:
    """Accept ``n`` or ``[lo, hi]`` (inclusive); return ``(lo, hi)``."""
    # ValueError (not TypeError): pydantic turns only ValueErrors into field errors.
    if isinstance(value, bool):
        raise ValueError(f"expected an int >= 0 or a [min, max] pair, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"expected an int >= 0, got {value}")
        return (value, value)
    if (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        low, high = value
        if low < 0 or high < low:
            raise ValueError(
                f"expected a [min, max] pair with 0 <= min <= max, got {list(value)}"
            )
        return (low, high)
    raise ValueError(
        f"expected an int >= 0 or a [min, max] pair of ints, got {value!r}"
    )


CountRange = Annotated[tuple[int, int], BeforeValidator(_count_range)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _GeneratedBase(_Strict):
    lanes: int = Field(1, ge=1, le=4, description="lanes per direction")
    speed_limit_mps: float = Field(13.89, gt=0, le=40)
    traffic_lights: bool = Field(
        True, description="signalise every junction with >= 3 arms"
    )
    sidewalks: bool = Field(
        True, description="sidewalks on every road, crossings at junctions"
    )
    junction_radius_m: float = Field(
        4.0,
        ge=1,
        le=30,
        description="corner radius of junctions (netgenerate's default 4 m makes tight turns; "
        "urban corners are 6-10 m)",
    )


class GridNetwork(_GeneratedBase):
    """A Manhattan grid (``netgenerate --grid``)."""

    type: Literal["grid"]
    junctions: int = Field(3, ge=2, le=12, description="junctions along each side")
    block_length_m: float = Field(100.0, ge=30, le=500)
    attach_length_m: float = Field(
        60.0, ge=0, le=500, description="dead-end arms at the border"
    )


class SpiderNetwork(_GeneratedBase):
    """A radial web of arms and rings (``netgenerate --spider``)."""

    type: Literal["spider"]
    arms: int = Field(5, ge=3, le=12)
    circles: int = Field(3, ge=1, le=8)
    ring_spacing_m: float = Field(80.0, ge=30, le=500)


class RandomNetwork(_GeneratedBase):
    """An irregular random network (``netgenerate --rand``)."""

    type: Literal["random"]
    iterations: int = Field(60, ge=5, le=2000)
    min_edge_m: float = Field(60.0, ge=20)
    max_edge_m: float = Field(150.0, ge=20)
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _edge_range(self) -> RandomNetwork:
        if self.max_edge_m < self.min_edge_m:
            raise ValueError(
                f"max_edge_m ({self.max_edge_m}) must be >= min_edge_m ({self.min_edge_m})"
            )
        return self


GeneratedNetwork = Annotated[
    GridNetwork | SpiderNetwork | RandomNetwork, Field(discriminator="type")
]


def _from_package(value: Any) -> Any:
    """``package://NAME/PATH`` → the file's path in the installed package (checked to exist).

    Runs before pydantic makes a ``Path`` of the text, which would fold ``//`` into ``/``.
    """
    return resolve_package_path(value) if isinstance(value, str) and is_package_path(value) else value


def _resolve_existing(value: Path, info: ValidationInfo, what: str) -> Path:
    base = (info.context or {}).get("base_dir")
    path = value if value.is_absolute() or base is None else Path(base) / value
    if path.is_dir():
        raise ValueError(f"{what} is a folder, not a file: {path}")
    if not path.is_file():
        raise ValueError(f"{what} not found: {path}")
    return path.resolve()


class MapConfig(_Strict):
    """Exactly one of ``generate`` (netgenerate), ``file`` (.net.xml[.gz]/.xodr) or ``town`` (CARLA).

    ``file`` is relative to the scenario file, or ``package://NAME/PATH`` inside an installed
    Python package (the networks that ship with eclipse-sumo, :mod:`found_rl.package_files`).
    """

    generate: GeneratedNetwork | None = None
    file: Annotated[Path | None, BeforeValidator(_from_package)] = None
    town: str | None = None
    netconvert_options: tuple[str, ...] = Field(
        (), description="extra netconvert flags for .xodr"
    )

    @field_validator("file")
    @classmethod
    def _file_exists(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return None
        if not str(value).endswith(NETWORK_SUFFIXES):
            raise ValueError(
                f"expected a {', '.join(NETWORK_SUFFIXES[:-1])} or {NETWORK_SUFFIXES[-1]} file, got {str(value)!r}"
            )
        return _resolve_existing(value, info, "map file")

    @model_validator(mode="after")
    def _exactly_one(self) -> MapConfig:
        given = [
            name
            for name in ("generate", "file", "town")
            if getattr(self, name) is not None
        ]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of generate, file, town; got {given or 'none'}"
            )
        return self


class RoutesConfig(_Strict):
    """A leaderboard ``routes.xml`` file (relative, or ``package://NAME/PATH``), or random routes."""

    file: Annotated[Path | None, BeforeValidator(_from_package)] = None
    random_length_m: float | None = Field(None, gt=10, le=20_000)
    town: str | None = Field(
        None,
        min_length=1,
        description="use only the file's routes of this town (leaderboard files hold several); routes that name "
        "no town (older route files) are kept",
    )
    command_lookahead_m: float = Field(
        20.0, ge=0, le=200, description="announce a junction turn or lane change at least this far before it"
    )
    command_lookahead_s: float = Field(
        3.0, ge=0, le=30, description="... or this many seconds of driving at the ego's speed, if farther"
    )

    @field_validator("file")
    @classmethod
    def _file_exists(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return None if value is None else _resolve_existing(value, info, "route file")

    @model_validator(mode="after")
    def _exactly_one(self) -> RoutesConfig:
        if (self.file is None) == (self.random_length_m is None):
            raise ValueError("give exactly one of file, random_length_m")
        if self.town is not None and self.file is None:
            raise ValueError("town selects routes of a route file; give file too")
        return self

    def with_file(self, path: Path) -> RoutesConfig:
        """These settings with route file ``path`` instead (a command line's ``--routes``)."""
        return RoutesConfig(**{**self.model_dump(exclude={"file", "random_length_m"}), "file": path})


class TrafficConfig(_Strict):
    """Background actors; a ``[min, max]`` pair is drawn per episode from the reset seed."""

    vehicles: CountRange = (0, 0)
    walkers: CountRange = (0, 0)
    warmup_s: float = Field(
        60.0,
        ge=0,
        le=3600,
        description="simulated seconds of traffic before the first episode",
    )
    reset: Literal["fast", "exact"] = Field(
        "fast",
        description="fast: reload warm traffic in place (ms); exact: also rebuild SUMO's network state "
        "so every episode replays exactly whatever ran before (tens of ms; for evaluation)",
    )
    observe_radius_m: float = Field(
        50.0,
        gt=0,
        description="actors farther from the ego are left out of snapshots (the BEV sees about 36 m)",
    )


class RouteTimeoutConfig(_Strict):
    """The CARLA leaderboard's time limit for a route: ``s_per_m`` × route length + ``initial_s``.

    The leaderboard gives 0.8 s per route metre plus 5 s; a fixed step limit instead either
    times out long routes with many red lights or lets short ones idle.
    """

    s_per_m: float = Field(0.8, gt=0, description="seconds allowed per metre of route")
    initial_s: float = Field(5.0, ge=0, description="seconds added to every route")

    def steps(self, route_length_m: float, step_s: float) -> int:
        """The limit in steps of ``step_s`` for a route of ``route_length_m``."""
        return max(1, math.ceil((self.s_per_m * route_length_m + self.initial_s) / step_s - 1e-9))


class EpisodeConfig(_Strict):
    """When an episode stops (ARCHITECTURE §5)."""

    max_steps: int = Field(
        1000, ge=1, description="truncate after this many 0.1 s steps"
    )
    route_timeout: RouteTimeoutConfig | None = Field(
        None,
        description="also truncate at the leaderboard's route time limit (whichever of the two comes first)",
    )
    blocked_s: float = Field(
        90.0, gt=0, description="terminate when slower than 0.1 m/s this long"
    )
    terminate_on_route_completion: bool = True


class Scenario(_Strict):
    """A validated scenario; build it with :func:`load_scenario`."""

    backend: Literal["sumo", "carla"] = "sumo"
    map: MapConfig
    routes: RoutesConfig
    traffic: TrafficConfig = TrafficConfig()
    episode: EpisodeConfig = EpisodeConfig()
    reward: Literal["valeo", "carl"] = "valeo"
    seed: int = Field(0, ge=0)
    description: str = ""
    source_path: Path | None = Field(
        None, exclude=True, description="set by load_scenario"
    )

    @model_validator(mode="after")
    def _backend_matches_map(self) -> Scenario:
        if self.backend == "sumo" and self.map.town is not None:
            raise ValueError(
                "map.town names a CARLA town; the sumo backend needs map.generate or map.file"
            )
        if self.backend == "carla" and self.map.generate is not None:
            raise ValueError(
                "map.generate builds a SUMO network; the carla backend needs map.town or an OpenDRIVE map.file"
            )
        if self.backend == "carla" and self.map.file is not None and self.map.file.suffix != ".xodr":
            raise ValueError(
                f"map.file: the carla backend loads OpenDRIVE (.xodr) files or map.town, got {self.map.file.name}"
            )
        return self


def _field_path(data: Any, loc: tuple[int | str, ...]) -> str:
    """Dotted path of ``loc`` through the user's input (drops pydantic's union tags)."""
    parts: list[str] = []
    node = data
    for key in loc:
        if isinstance(node, dict) and key in node:
            node = node[key]
            parts.append(str(key))
        elif isinstance(node, list) and isinstance(key, int) and key < len(node):
            node = node[key]
            parts.append(f"[{key}]")
    return ".".join(parts).replace(".[", "[") or "(top level)"


def format_field_error(source: str, data: Any, error: Any) -> str:
    field = _field_path(data, tuple(error["loc"]))
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return f"{source}: {field}: unknown field (check the spelling)"
    if error["type"] == "missing":
        loc = ".".join(str(p) for p in error["loc"])
        return f"{source}: {loc}: required field is missing"
    # Our own validators (type ``value_error``) write whole messages that show the value;
    # pydantic's built-in ones (bounds, types, literals) do not, so they get it appended.
    is_builtin = error["type"] != "value_error"
    if is_builtin and "got" not in message and not isinstance(error.get("input"), dict):
        message = f"{message[:1].lower()}{message[1:]}, got {error.get('input')!r}"
    return f"{source}: {field}: {message}"


def parse_scenario(
    data: Any, *, source: str = "<scenario>", base_dir: Path | None = None
) -> Scenario:
    """Validate already-parsed YAML; errors name ``source`` and the field."""
    if not isinstance(data, dict):
        # A user mistake in the file, so ValueError like every other scenario error (CLI exit 2).
        kind = type(data).__name__
        raise UserError(f"{source}: expected a mapping of scenario fields, got {kind}")
    if is_run_config_data(data):
        raise UserError(f"{source}: {_run_config_mistake(data, base_dir)}")
    if "source_path" in data:
        raise UserError(
            f"{source}: source_path: unknown field (it is set by the loader)"
        )
    try:
        scenario = Scenario.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        raise UserError(
            "\n".join(format_field_error(source, data, e) for e in exc.errors())
        ) from None
    return scenario


def is_run_config_data(data: Any) -> bool:
    """Whether parsed YAML is a run config: a mapping without a ``map`` that has a field only
    a run config has (``scenario``, ``algorithm``, ``budget``, ...; ``seed`` is both's)."""
    if not isinstance(data, dict) or "map" in data:
        return False
    return bool(set(data) & (RUN_CONFIG_FIELDS - set(Scenario.model_fields)))


def _run_config_mistake(data: dict[str, Any], base_dir: Path | None) -> str:
    """What to say when a run config was passed as a scenario: which file it is, and its scenarios."""
    named = data.get("scenario")
    names = [named] if isinstance(named, str) else named if isinstance(named, list) else []
    names = [str(base_dir / name) if base_dir is not None else name for name in names if isinstance(name, str)]
    if len(names) > 1:
        which = f"its scenarios are {', '.join(names)}; pass one of them"
    elif names:
        which = f"its scenario is {names[0]}; pass that"
    else:
        which = "it names no scenario"
    return f"is a run config (for `found-rl train`), not a scenario; {which}"


def yaml_problem(exc: yaml.YAMLError) -> str:
    """One line: the parser's problem and where (PyYAML's own text spans several lines)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}"


def read_yaml_file(path: Path, what: str) -> Any:
    """The parsed YAML of a ``what`` file (``scenario``, ``suite``) a user names.

    Raises:
        FileNotFoundError: the file does not exist.
        UserError: a folder, not UTF-8 text, or malformed YAML (the line and column named).
    """
    if path.is_dir():
        raise UserError(f"{path}: is a folder; pass a {what} YAML file")
    if not path.is_file():
        raise MissingPathError(f"{what} file not found: {path}")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not a UTF-8 text file (byte {exc.start}); a {what} is YAML text") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: malformed YAML: {yaml_problem(exc)}") from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: malformed YAML or an invalid field; the message names the file and field.
    """
    path = Path(path)
    data = read_yaml_file(path, "scenario")
    scenario = parse_scenario(data, source=str(path), base_dir=path.parent)
    return scenario.model_copy(update={"source_path": path.resolve()})

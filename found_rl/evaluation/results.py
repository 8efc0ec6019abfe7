"""Evaluation results in the CARLA leaderboard's JSON layout, written atomically, resumable.

The file looks like the leaderboard's ``results.json``::

    {"_checkpoint": {"global_record": {...}, "progress": [done, total], "records": [...]},
     "entry_status": "Started" | "Finished", "eligible": true, "sensors": [],
     "labels": [...], "values": [...], "found_rl": {<run identity>}}

Scores are percentages (0-100) as on the leaderboard; ``score_composed`` is the leaderboard's
key for the driving score and ``score_composite`` the same number under the name used in
found-rl's docs. Each record's ``infractions`` maps leaderboard keys to sentences that end
with the location, like the leaderboard's ``"... at (x=1.0, y=2.0, z=0.0)"``.

``found_rl`` identifies the run (scenario, routes, agent, repetitions, seed): re-running with
the same ``--out`` resumes only if it matches, and a file that is not ours (no such block,
not JSON) is never overwritten.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    TypeAdapter,
    ValidationError,
)

from found_rl.atomic import replaced_atomically
from found_rl.errors import UserError
from found_rl.events import EpisodeSummary, InfractionKind
from found_rl.metrics import GlobalScores, RouteScores, count_infractions, global_scores

FORMAT_VERSION = 1

GLOBAL_LABELS = (
    "Avg. driving score",
    "Avg. route completion",
    "Avg. infraction penalty",
    "Collisions with pedestrians",
    "Collisions with vehicles",
    "Collisions with layout",
    "Red lights infractions",
    "Stop sign infractions",
    "Off-road infractions",
    "Route deviations",
    "Route timeouts",
    "Agent blocked",
)
_GLOBAL_VALUE_KINDS = (
    InfractionKind.COLLISION_PEDESTRIAN,
    InfractionKind.COLLISION_VEHICLE,
    InfractionKind.COLLISION_LAYOUT,
    InfractionKind.RED_LIGHT,
    InfractionKind.STOP_SIGN,
    InfractionKind.OUTSIDE_ROUTE_LANES,
    InfractionKind.ROUTE_DEVIATION,
    InfractionKind.ROUTE_TIMEOUT,
    InfractionKind.VEHICLE_BLOCKED,
)


def record_name(route_id: str, repetition: int) -> str:
    """The leaderboard 2.0 record id: ``RouteScenario_<id>_rep<n>``."""
    return f"RouteScenario_{route_id}_rep{repetition}"


def build_record(
    index: int,
    repetition: int,
    summary: EpisodeSummary,
    scores: RouteScores,
    duration_system_s: float,
) -> dict[str, Any]:
    """One leaderboard record for a finished episode (scores in %)."""
    infractions: dict[str, list[str]] = {kind.value: [] for kind in InfractionKind}
    for infraction in summary.infractions:
        x, y = infraction.xy
        text = infraction.detail or infraction.kind.value.replace("_", " ")
        infractions[infraction.kind.value].append(f"{text} at (x={x:.1f}, y={y:.1f}, z=0.0)")
    counts = count_infractions(summary.infractions)
    return {
        "index": index,
        "route_id": record_name(summary.route_id, repetition),
        "status": summary.status.value,
        "infractions": infractions,
        "scores": _score_fields(scores.route_completion, scores.infraction_penalty, scores.driving_score),
        "meta": {
            "route_name": summary.route_id,
            "repetition": repetition,
            "route_length": summary.route_length_m,
            "distance_driven_m": summary.distance_m,
            "driven_km": scores.driven_km,
            "outside_lane_percentage": 100.0 * scores.outside_lane_fraction,
            "duration_game": summary.duration_s,
            "duration_system": duration_system_s,
            "steps": summary.steps,
            "infraction_counts": {kind.value: n for kind, n in counts.items()},
            "infractions_per_km": {kind.value: n / scores.driven_km for kind, n in counts.items()},
        },
    }


def _score_fields(route_completion: float, infraction_penalty: float, driving_score: float) -> dict[str, float]:
    """A record's ``scores`` in %, the driving score under the leaderboard's key and the issue's."""
    return {
        "score_route": 100.0 * route_completion,
        "score_penalty": 100.0 * infraction_penalty,
        "score_composed": 100.0 * driving_score,
        "score_composite": 100.0 * driving_score,
    }


def scores_of_record(record: Mapping[str, Any]) -> tuple[RouteScores, dict[InfractionKind, int]]:
    """Recover a record's fractional scores and infraction counts (for the global record)."""
    meta = record["meta"]
    route_scores = RouteScores(
        route_completion=record["scores"]["score_route"] / 100.0,
        infraction_penalty=record["scores"]["score_penalty"] / 100.0,
        driving_score=record["scores"]["score_composed"] / 100.0,
        outside_lane_fraction=meta["outside_lane_percentage"] / 100.0,
        driven_km=meta["driven_km"],
    )
    counts = {kind: int(meta["infraction_counts"].get(kind.value, 0)) for kind in InfractionKind}
    return route_scores, counts


def scores_by_route(records: list[dict[str, Any]], key: str = "score_composed") -> list[list[float]]:
    """Per route, in record order, the fractions its repetitions scored under ``key`` of ``scores``
    (``score_composed``: DS, ``score_route``: RC); the input of a bootstrap interval."""
    routes: dict[str, list[float]] = {}
    for record in sorted(records, key=lambda r: r["index"]):
        routes.setdefault(str(record["meta"]["route_name"]), []).append(float(record["scores"][key]) / 100.0)
    return list(routes.values())


def build_global_record(records: list[dict[str, Any]]) -> tuple[dict[str, Any], GlobalScores]:
    """The leaderboard ``global_record`` over ``records`` (index and route_id -1)."""
    pairs = [scores_of_record(record) for record in records]
    totals = global_scores([p[0] for p in pairs], [p[1] for p in pairs])
    failed = any(record["status"] != "Completed" for record in records)
    durations = [record["meta"]["duration_game"] for record in records]
    return (
        {
            "index": -1,
            "route_id": -1,
            "status": "Failed" if failed else "Completed",
            "infractions": {kind.value: rate for kind, rate in totals.infractions_per_km.items()},
            "scores": _score_fields(totals.route_completion, totals.infraction_penalty, totals.driving_score),
            "meta": {
                "num_routes": totals.num_routes,
                "driven_km": totals.driven_km,
                "duration_game": sum(durations),
                "exceptions": [
                    [record["route_id"], record["index"], record["status"]]
                    for record in records
                    if record["status"] != "Completed"
                ],
            },
        },
        totals,
    )


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class _StoredScores(_Loose):
    score_route: float
    score_penalty: float
    score_composed: float


class _StoredMeta(_Loose):
    outside_lane_percentage: float
    driven_km: float
    duration_game: float
    infraction_counts: dict[str, int]


class _StoredRecord(_Loose):
    """The fields of a stored record that resuming reads to rebuild the global record.

    A hand-edited or damaged file must be refused naming the bad field, not crash later in
    :func:`build_global_record` or skip episodes that never ran.
    """

    index: StrictInt = Field(ge=0)
    route_id: str
    status: str
    scores: _StoredScores
    meta: _StoredMeta


_STORED_RECORDS = TypeAdapter(list[_StoredRecord])


def _first_error(exc: ValidationError) -> str:
    """``records.0.scores: Field required`` for the first problem pydantic found."""
    error = exc.errors()[0]
    return ".".join(["records", *(str(part) for part in error["loc"])]) + f": {error['msg']}"


class ResultsFile:
    """The results JSON of one evaluation run: load-or-create, add records, save atomically.

    Args:
        path: the ``--out`` file.
        identity: what makes two runs the same run (scenario, routes, agent, repetitions,
            seed); JSON-serialisable. Resuming requires an equal identity.
        total: number of episodes the run will record (routes × repetitions).

    Raises:
        ValueError: if ``path`` exists but is not JSON, is not a found-rl results file, or
            belongs to a different run.
    """

    def __init__(self, path: str | os.PathLike[str], identity: Mapping[str, Any], total: int) -> None:
        self.path = Path(path)
        self.identity = json.loads(json.dumps(dict(identity)))
        self.total = total
        self.records: list[dict[str, Any]] = []
        if self.path.exists():
            self.records = self._load_existing()

    def _load_existing(self) -> list[dict[str, Any]]:
        refuse = f"refusing to overwrite --out {self.path}"
        try:
            data = json.loads(self.path.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserError(f"{refuse}: it is not valid JSON ({exc}); pass a new path") from exc
        if not (isinstance(data, dict) and isinstance(data.get("found_rl"), dict)
                and isinstance(data.get("_checkpoint"), dict)):
            raise UserError(
                f"{refuse}: it is not a found-rl results file (no 'found_rl' and '_checkpoint' "
                "blocks); pass a new path"
            )
        stored = data["found_rl"].get("identity")
        if stored != self.identity:
            raise UserError(
                f"{refuse}: it holds a different run (stored {stored}, this run {self.identity}); "
                "pass a new path to start a new run, or the same arguments to resume"
            )
        records = data["_checkpoint"].get("records")
        if not isinstance(records, list):
            raise UserError(f"{refuse}: '_checkpoint.records' is not a list; the file is corrupt")
        try:
            _STORED_RECORDS.validate_python(records)
        except ValidationError as exc:
            raise UserError(f"{refuse}: _checkpoint.{_first_error(exc)}; the file is corrupt") from None
        indices = [record["index"] for record in records]
        if len(set(indices)) != len(indices) or any(index >= self.total for index in indices):
            raise UserError(
                f"{refuse}: _checkpoint.records: indices {sorted(indices)} repeat or lie outside this run's "
                f"{self.total} episodes; the file is corrupt"
            )
        return records

    @property
    def finished_indices(self) -> set[int]:
        """Episode indices already recorded (skipped on resume)."""
        return {int(record["index"]) for record in self.records}

    def add(self, record: dict[str, Any]) -> None:
        """Add (or replace, by index) one record and save the file."""
        self.records = [r for r in self.records if r["index"] != record["index"]] + [record]
        self.records.sort(key=lambda r: r["index"])
        self.save()

    def global_scores(self) -> GlobalScores:
        return build_global_record(self.records)[1]

    def to_json(self) -> dict[str, Any]:
        global_record, totals = build_global_record(self.records)
        is_finished = len(self.records) >= self.total
        values = [
            100.0 * totals.driving_score,
            100.0 * totals.route_completion,
            100.0 * totals.infraction_penalty,
        ] + [totals.infractions_per_km[kind] for kind in _GLOBAL_VALUE_KINDS]
        return {
            "_checkpoint": {
                "global_record": global_record,
                "progress": [len(self.records), self.total],
                "records": self.records,
            },
            "entry_status": "Finished" if is_finished else "Started",
            "eligible": True,
            "sensors": [],
            "labels": list(GLOBAL_LABELS),
            "values": [f"{value:.3f}" for value in values],
            "found_rl": {"format_version": FORMAT_VERSION, "identity": self.identity},
        }

    def save(self) -> None:
        """Write to a temporary file in the same folder, then rename over ``path``."""
        with replaced_atomically(self.path) as tmp:
            tmp.write_text(json.dumps(self.to_json(), indent=2))

"""The training run folder (ARCHITECTURE §9): where each file of a run lives.

::

    RUN/
      config.yaml            resolved run config (every default filled in)
      eval_routes/           the routes of each evaluation town (leaderboard layout): NAME.xml for
                             a town training never drove, seen_NAME.xml for one it did
      towns.json             each evaluation town's road network (its identity), whether it is unseen,
                             what drove it (training scenarios, the advisor's data), and the advisor's towns
      references.json        the reference policies' scores on those routes
      evaluations.jsonl      one line per evaluation: mark, env_steps, route_completion,
                             driving_score, eval_town_unseen, towns, seen, ...
      evaluations/           one leaderboard results JSON per evaluation and town
      videos/                the BEV video of the first evaluation route, per evaluation
      checkpoints/           checkpoint.pt (+ its replay_*.npz), policy_eval.pt
      policy.pt              the final policy (``found-rl eval --agent checkpoint:RUN/policy.pt``)
      finished.json          written only when the loop ended because the budget was used up (never on
                             Ctrl-C, a failure or a kill); a resume removes it until it finishes again
      events.out.tfevents.*  TensorBoard
      advisor_server.log     the spawned advisor server's log
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from found_rl.atomic import replaced_atomically
from found_rl.errors import ExistingPathError, MissingPathError, NotAFolderError, UserError
from found_rl.train.config import RESUMABLE_CHANGES, RunConfig, config_differences, recorded_config

AUTO_ADVISOR_KEYS = ("label_rate", "label_lag_steps")
"""Advisor keys a run may ask to be chosen at its start (``auto``): config.yaml holds the choice."""


@dataclass(frozen=True)
class RunFolder:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def eval_routes(self) -> Path:
        return self.root / "eval_routes"

    @property
    def references(self) -> Path:
        return self.root / "references.json"

    @property
    def towns(self) -> Path:
        return self.root / "towns.json"

    def write_towns(self, record: dict[str, Any]) -> None:
        """Record the evaluation towns' networks and which of them are unseen (``EvaluationPlan.towns_record``)."""
        _write_json(self.towns, record)

    @property
    def evaluations_jsonl(self) -> Path:
        return self.root / "evaluations.jsonl"

    @property
    def evaluations(self) -> Path:
        return self.root / "evaluations"

    @property
    def videos(self) -> Path:
        return self.root / "videos"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def checkpoint(self) -> Path:
        return self.checkpoints / "checkpoint.pt"

    def eval_policy(self, env_steps: int) -> Path:
        """The policy snapshot an evaluation drives (kept until its row is written)."""
        return self.checkpoints / f"policy_eval_{env_steps:010d}.pt"

    @property
    def final_policy(self) -> Path:
        return self.root / "policy.pt"

    @property
    def finished(self) -> Path:
        return self.root / "finished.json"

    def write_finished(self, record: dict[str, Any]) -> None:
        """Record that the run used up its budget (the only proof a run is complete: a stopped
        run leaves ``policy.pt`` too)."""
        _write_json(self.finished, record)

    def finished_record(self) -> dict[str, Any] | None:
        """The record of a run that used up its budget, or ``None`` (running, stopped, or resumed since).

        Raises:
            UserError: the record is not a JSON object.
        """
        if not self.finished.is_file():
            return None
        try:
            record = json.loads(self.finished.read_text())
        except json.JSONDecodeError:
            record = None
        if not isinstance(record, dict):
            raise UserError(f"{self.finished}: not a finished record (a JSON object); delete it and resume the run")
        return record

    @property
    def server_log(self) -> Path:
        return self.root / "advisor_server.log"

    @property
    def label_probe(self) -> Path:
        return self.root / "label_probe.json"

    def write_label_probe(self, record: dict[str, Any]) -> None:
        """What the start-up probe of ``advisor.label_rate: auto`` measured and chose."""
        _write_json(self.label_probe, record)

    def create(self, config: RunConfig) -> None:
        """Make a new run folder holding ``config``.

        Raises:
            FileExistsError: the folder already holds a run (resume it with ``--resume``).
            NotADirectoryError: the path is a file.
        """
        if self.root.exists() and not self.root.is_dir():
            raise NotAFolderError(f"--run-dir {self.root}: is a file, not a folder")
        if self.config.exists():
            raise ExistingPathError(
                f"--run-dir {self.root}: already holds a run ({self.config.name}); continue it with "
                f"--resume {self.root}, or pass a new --run-dir"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        with replaced_atomically(self.config) as tmp:
            tmp.write_text(yaml.safe_dump(config.to_yaml_dict(), sort_keys=False))

    def stored_config(self) -> dict[str, Any]:
        """The resolved config the run was started with.

        Raises:
            FileNotFoundError: the folder holds no run.
            ValueError: the stored config is not YAML.
        """
        if not self.config.is_file():
            raise MissingPathError(f"--resume {self.root}: no run here ({self.config.name} is missing)")
        try:
            data = yaml.safe_load(self.config.read_text())
        except yaml.YAMLError as exc:
            raise UserError(f"--resume {self.root}: {self.config.name} is not valid YAML ({exc})") from None
        if not isinstance(data, dict):
            raise UserError(f"--resume {self.root}: {self.config.name} does not hold a run config")
        return data

    def resumed_config(self, config: RunConfig) -> RunConfig:
        """``config`` for continuing the run here: the label rate and lag its start-up probe chose
        stand in for ``label_rate: auto`` and ``label_lag_steps: auto`` (so the resume repeats the
        run), and anything else that differs beyond the budget is refused.

        Raises:
            ValueError: listing every differing key with both values.
        """
        recorded = self.stored_config().get("advisor") or {}
        resolved = {key: recorded[key] for key in AUTO_ADVISOR_KEYS
                    if getattr(config.advisor, key) == "auto" and isinstance(recorded.get(key), (int, float))}
        if resolved:
            config = config.model_copy(update={"advisor": config.advisor.model_copy(update=resolved)})
        self.check_resumable_with(config)
        return config

    def check_resumable_with(self, config: RunConfig) -> None:
        """Refuse to continue a run under a config that differs beyond its budget.

        Raises:
            ValueError: listing every differing key with both values.
        """
        differences = [
            line for line in config_differences(recorded_config(self.stored_config()), config.to_yaml_dict())
            if not line.startswith(RESUMABLE_CHANGES)
        ]
        if differences:
            raise UserError(
                f"--resume {self.root}: the run was made with a different config; differing keys:\n  "
                + "\n  ".join(differences)
            )

    def update_config(self, config: RunConfig) -> None:
        """Store the (budget-extended) config of a resumed run."""
        with replaced_atomically(self.config) as tmp:
            tmp.write_text(yaml.safe_dump(config.to_yaml_dict(), sort_keys=False))


def _write_json(path: Path, record: dict[str, Any]) -> None:
    with replaced_atomically(path) as tmp:
        tmp.write_text(json.dumps(record, indent=2))


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append one line with one write call, flushed to disk (no half line survives a crash)."""
    line = json.dumps(record) + "\n"
    with open(path, "a", encoding="utf-8") as file:
        file.write(line)
        file.flush()
        os.fsync(file.fileno())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every complete line of a JSONL file (a torn last line is ignored).

    Raises:
        ValueError: a line in the middle is not JSON (names the file and line).
    """
    if not path.is_file():
        return []
    records = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):
                break  # a line the crash cut short
            raise UserError(f"{path}: line {number} is not JSON") from None
    return records


def truncate_jsonl(path: Path, max_env_steps: int) -> None:
    """Keep only the evaluations up to a checkpoint (a resumed run repeats the later ones)."""
    kept = [r for r in read_jsonl(path) if int(r.get("env_steps", 0)) <= max_env_steps]
    with replaced_atomically(path) as tmp:
        tmp.write_text("".join(json.dumps(r) + "\n" for r in kept))

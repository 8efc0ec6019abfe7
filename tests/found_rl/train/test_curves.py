"""Curves read from run folders: what their legend says about the towns behind the headline."""

from __future__ import annotations

import json

from found_rl.train.curves import read_curve


def write_rows(run_dir, towns: dict[str, bool], eval_town_unseen: bool) -> None:
    row = {"mark": 0, "env_steps": 0, "route_completion": 0.5, "driving_score": 0.4, "infraction_penalty": 0.8,
           "eval_town_unseen": eval_town_unseen, "towns": {name: {"unseen": unseen} for name, unseen in towns.items()}}
    run_dir.mkdir()
    (run_dir / "evaluations.jsonl").write_text(json.dumps(row) + "\n")


def test_the_headline_counts_the_unseen_towns_of_a_suite_or_the_seen_ones_when_none_is_unseen(tmp_path):
    write_rows(tmp_path / "suite", {"small_grid (seen)": False, "a": True, "b": True, "c": True}, True)
    write_rows(tmp_path / "seen", {"small_grid (seen)": False}, False)
    write_rows(tmp_path / "one", {"heldout_town": True}, True)
    assert read_curve(tmp_path / "suite").headline_towns == 3
    assert read_curve(tmp_path / "seen").headline_towns == 1
    assert read_curve(tmp_path / "one").headline_towns == 1

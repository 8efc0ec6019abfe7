"""``found-rl bench train``: every configuration runs, and each ratio is the one of its two rows."""

import json
from pathlib import Path

import pytest

from found_rl import cli

TINY = Path(__file__).resolve().parents[1] / "train" / "data" / "tiny_random.yaml"


@pytest.mark.slow
def test_json_report_compares_the_loops_and_the_advisors_side_by_side(capsys, tmp_path):
    from found_rl.vlm.scratch import init_advisor

    init_advisor(tmp_path / "vlm", "tiny", seed=0)
    argv = ["bench", "train", "--scenario", str(TINY), "--env-steps", "120", "--learning-starts", "40",
            "--clips", "2", "--vlm-model", str(tmp_path / "vlm"), "--no-progress", "--json"]
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rows = report["configurations"]
    assert list(rows) == ["plain, alternating", "plain, overlapped", "guided, advisor silent",
                          "expert, overlapped", "VLM, overlapped"]
    for row in rows.values():
        assert row["env_steps"] >= 120 and row["updates"] > 0 and row["updates_per_s"] > 0
        assert set(row["shares"]) >= {"sampling", "policy", "updates", "advisor"}
    plain, overlapped, silent = rows["plain, alternating"], rows["plain, overlapped"], rows["guided, advisor silent"]
    assert report["overlap_speedup"] == overlapped["updates_per_s"] / plain["updates_per_s"]
    assert report["advisor_ratio"] == rows["expert, overlapped"]["env_steps_per_s"] / silent["env_steps_per_s"]
    assert report["vlm_advisor_ratio"] == rows["VLM, overlapped"]["env_steps_per_s"] / silent["env_steps_per_s"]
    assert silent["label_rate"] == 0.01 and rows["expert, overlapped"]["label_rate"] > 0
    assert 0 < report["vlm_label_rate"] <= 1 and report["vlm_marked_down"] == 0
    assert report["vlm_budget_coverage"] > 0.5  # the served VLM answered its budget
    assert set(report["targets_met"]) >= {"overlap_speedup", "advisor_ratio", "vlm_advisor_ratio",
                                          "vlm_budget_coverage", "vlm_never_marked_down"}


def test_a_missing_vlm_model_folder_is_refused_naming_the_flag(capsys, tmp_path):
    argv = ["bench", "train", "--scenario", str(TINY), "--vlm-model", str(tmp_path / "nowhere"), "--json"]
    assert cli.main(argv) == 2
    assert "--vlm-model" in capsys.readouterr().err

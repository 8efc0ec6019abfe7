"""``found-rl bench train``: every configuration runs, and each ratio is the one of its two rows."""

import json
from pathlib import Path

from found_rl import cli
from found_rl.bench.train import CONFIGURATIONS, TARGETS, _median_run, _report

TINY = Path(__file__).resolve().parents[1] / "train" / "data" / "tiny_random.yaml"


def row(env_steps_per_s: float, updates_per_s: float, **labels) -> dict:
    return {"env_steps": 400, "updates": 90, "wall_s": 9.0, "env_steps_per_s": env_steps_per_s,
            "updates_per_s": updates_per_s, "shares": {}, **labels}


def advised(env_steps_per_s: float, updates_per_s: float, rate: float, coverage: float, down: int) -> dict:
    return row(env_steps_per_s, updates_per_s, label_rate=rate, budget_coverage=coverage, marked_down=down)


def test_each_ratio_is_taken_between_its_own_two_configurations():
    rows = {
        "plain, alternating": row(60.0, 15.0),
        "plain, overlapped": row(90.0, 22.5),
        "guided, advisor silent": advised(80.0, 20.0, 0.01, 1.0, 0),
        "expert, overlapped": advised(76.0, 19.0, 1.0, 1.0, 0),
        "VLM, overlapped": advised(60.0, 15.0, 0.2, 0.9, 1),
    }
    report = _report(rows)
    assert report["overlap_speedup"] == 1.5  # updates/s, overlapped over alternating
    assert report["guidance_update_ratio"] == 20.0 / 22.5
    assert report["advisor_ratio"] == 76.0 / 80.0 and report["vlm_advisor_ratio"] == 60.0 / 80.0  # vs silent
    met = report["targets_met"]
    assert met == {"overlap_speedup": False, "advisor_ratio": True, "vlm_advisor_ratio": False,
                   "vlm_budget_coverage": False, "vlm_never_marked_down": False}
    assert set(TARGETS) <= set(met)


def test_the_median_run_is_a_whole_run():
    runs = [row(70.0, 17.0), row(95.0, 24.0), row(90.0, 22.0)]
    median = _median_run(runs)
    assert (median["env_steps_per_s"], median["updates_per_s"]) == (90.0, 22.0)
    assert median["env_steps_per_s_all"] == [70.0, 95.0, 90.0]


def test_a_real_run_measures_every_configuration_but_the_vlm(capsys):
    argv = ["bench", "train", "--scenario", str(TINY), "--env-steps", "100", "--learning-starts", "40",
            "--clips", "2", "--skip-vlm", "--no-progress", "--json"]
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rows = report["configurations"]
    assert list(rows) == [name for name, (advisor, _) in CONFIGURATIONS.items() if advisor != "vlm"]
    for measured in rows.values():
        assert measured["env_steps"] >= 100 and measured["updates"] > 0 and measured["updates_per_s"] > 0
        assert set(measured["shares"]) >= {"sampling", "policy", "updates", "advisor"}
    assert rows["guided, advisor silent"]["label_rate"] == 0.01 and rows["expert, overlapped"]["label_rate"] > 0
    assert "vlm_advisor_ratio" not in report


def test_a_missing_vlm_model_folder_is_refused_naming_the_flag(capsys, tmp_path):
    argv = ["bench", "train", "--scenario", str(TINY), "--vlm-model", str(tmp_path / "nowhere"), "--json"]
    assert cli.main(argv) == 2
    assert "--vlm-model" in capsys.readouterr().err

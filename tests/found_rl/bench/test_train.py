"""``found-rl bench train``: both configurations run and the ratio is reported."""

import json
from pathlib import Path

from found_rl import cli

TINY = Path(__file__).resolve().parents[1] / "train" / "data" / "tiny_random.yaml"


def test_json_report_compares_advisor_off_and_on(capsys):
    argv = ["bench", "train", "--scenario", str(TINY), "--env-steps", "100", "--learning-starts", "40",
            "--clips", "2", "--no-progress", "--json"]
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["env_steps_per_s"] > 0 and report["updates_per_s"] > 0
    on, off = report["advisor_on"], report["advisor_off"]
    assert report["advisor_throughput_ratio"] == on["env_steps_per_s"] / off["env_steps_per_s"]
    assert off["label_coverage"] == 0 and on["label_coverage"] > 0
    assert set(on["shares"]) >= {"sampling", "policy", "updates", "advisor"}

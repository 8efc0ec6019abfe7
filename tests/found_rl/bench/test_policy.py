"""``found-rl bench policy --preset``: the JSON keys and the preset's cost model."""

import json

import pytest

from found_rl import cli
from found_rl.bench.policy import TARGETS, actor_cost
from found_rl.models.encoders import NETWORK_PRESETS


def test_every_preset_has_targets():
    assert set(TARGETS) == set(NETWORK_PRESETS)


def test_flops_follow_the_layers():
    roach_flops, roach_params = actor_cost("roach")
    cpu_flops, cpu_params = actor_cost("cpu")
    assert 80e6 < roach_flops < 100e6  # the Roach encoder: about 87 MFLOP a frame (issue 10)
    assert cpu_flops < roach_flops / 20 and cpu_params < roach_params / 5


@pytest.mark.parametrize("preset", ["cpu"])
def test_json_report(capsys, preset, progress_bars):
    assert cli.main(["bench", "policy", "--preset", preset, "--seconds", "0.05", "--threads", "1", "--json"]) == 0
    assert progress_bars.finished("bench policy")
    report = json.loads(capsys.readouterr().out)
    assert report["preset"] == preset and report["fps_b1"] > 0 and report["fps_b64"] > 0
    assert report["sac_updates_per_s"] > 0 and set(report["targets_met"]) == set(TARGETS[preset])

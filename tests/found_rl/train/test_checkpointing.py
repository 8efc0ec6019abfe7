"""Run checkpoints: what a resume refuses before it writes anything."""

from __future__ import annotations

import pytest

from found_rl.errors import UserError
from found_rl.models.encoders import network_preset
from found_rl.models.observation import ObsSpec
from found_rl.models.policy import PolicySpec
from found_rl.state_vector import ROACH_STATE_SIZE, STATE_SIZE
from found_rl.train.checkpointing import load_run_checkpoint, save_run_checkpoint


def write_checkpoint(path, state_dim: int):
    spec = PolicySpec("sac", ObsSpec(bev_shape=(15, 48, 48), state_dim=state_dim), 2, network_preset("cpu"))
    save_run_checkpoint(path, spec, {}, {"learner": {}, "counters": {"env_steps": 5}}, None, 5)


def test_a_checkpoint_of_todays_state_loads(tmp_path):
    write_checkpoint(tmp_path / "checkpoint.pt", STATE_SIZE)
    assert load_run_checkpoint(tmp_path / "checkpoint.pt")["counters"] == {"env_steps": 5}


def test_a_run_trained_on_the_ten_number_state_is_told_to_start_again(tmp_path):
    write_checkpoint(tmp_path / "checkpoint.pt", ROACH_STATE_SIZE)
    expected = r"checkpoint\.pt was trained on a 10-number state vector.*gives 18.*new --run-dir"
    with pytest.raises(UserError, match=expected):
        load_run_checkpoint(tmp_path / "checkpoint.pt")

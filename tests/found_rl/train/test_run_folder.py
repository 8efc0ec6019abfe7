"""The run folder: what a resume may change and what it must keep."""

from __future__ import annotations

import pytest

from found_rl.errors import UserError
from found_rl.train.config import validate_run_config
from found_rl.train.run_folder import RunFolder

from .conftest import tiny_run_config


def asked(tmp_path, **advisor):
    return validate_run_config(tiny_run_config(
        advisor={"spawn": "expert", **advisor}, guidance={"vmr": {"enabled": True}}), "test", tmp_path)


def test_a_resume_asking_for_auto_label_rate_and_lag_gets_what_the_run_chose(tmp_path):
    folder = RunFolder(tmp_path / "run")
    config = asked(tmp_path, label_rate="auto", label_lag_steps="auto")
    folder.create(config)
    chosen = config.advisor.model_copy(update={"label_rate": 0.5, "label_lag_steps": 16})
    folder.update_config(config.model_copy(update={"advisor": chosen}))  # what the start-up probe records

    resumed = folder.resumed_config(asked(tmp_path, label_rate="auto", label_lag_steps="auto"))
    assert (resumed.advisor.label_rate, resumed.advisor.label_lag_steps) == (0.5, 16)
    with pytest.raises(UserError, match=r"advisor\.label_lag_steps: 16 in the run, 8 now"):
        folder.resumed_config(asked(tmp_path, label_rate="auto", label_lag_steps=8))

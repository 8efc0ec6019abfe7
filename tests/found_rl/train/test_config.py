"""Run configs: what a scenario loader knows of them stays in step with ``RunConfig``."""

from __future__ import annotations

from found_rl.scenario import RUN_CONFIG_FIELDS, Scenario
from found_rl.train.config import RunConfig, is_run_config


def test_the_scenario_loaders_list_of_run_config_fields_is_run_configs():
    # scenario.py sits below train/ and cannot import RunConfig; this keeps its copy of the names equal
    assert set(RUN_CONFIG_FIELDS) == set(RunConfig.model_fields)


def test_a_run_config_and_a_scenario_are_told_apart():
    assert is_run_config({"scenario": "town.yaml"}) and is_run_config({"algorithm": "sac", "seed": 1})
    assert not is_run_config({"map": {"generate": {"type": "grid"}}, "seed": 1})
    assert not is_run_config({"seed": 1})  # a field both have decides nothing
    assert set(Scenario.model_fields) - {"source_path"} - RUN_CONFIG_FIELDS  # each has fields of its own

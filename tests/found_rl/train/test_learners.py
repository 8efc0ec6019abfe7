"""The learner a run config builds: guidance settings handed on unchanged, storage from the registry."""

from __future__ import annotations

import pytest
import torch
import yaml

from found_rl.models.observation import ObsSpec
from found_rl.train.config import RunConfig, validate_run_config
from found_rl.train.learners import build_learner, learner_config
from found_rl.train.run_folder import RunFolder

from .conftest import tiny_run_config

CPU = torch.device("cpu")
GUIDED = {"vmr": {"enabled": True, "margin": 1.5}, "awag": {"enabled": True, "coef": 0.5},
          "clip_bonus": {"enabled": True}}


def run_config(tmp_path, **sections) -> RunConfig:
    sections.setdefault("advisor", {"urls": ["http://127.0.0.1:8470"]})
    return validate_run_config(tiny_run_config(**sections), "run.yaml", tmp_path)


@pytest.mark.parametrize("algorithm", ["sac", "drqv2"])
def test_the_learner_reads_the_run_configs_own_settings_objects(tmp_path, algorithm):
    config = run_config(tmp_path, algorithm=algorithm, guidance=GUIDED)
    learner = learner_config(config, CPU)
    assert learner.vmr is config.guidance.vmr and learner.clip_bonus is config.guidance.clip_bonus
    assert learner.awag is config.guidance.awag and learner.awag.coef == 0.5


def test_drqv2_fills_the_awag_fields_left_unset_with_its_own_and_records_them(tmp_path):
    config = run_config(tmp_path, algorithm="drqv2", guidance={"awag": {"enabled": True, "coef": 0.5}})
    assert config.guidance.awag.schedule == "drqv2_cosine" and config.guidance.awag.coef == 0.5
    assert config.to_yaml_dict()["guidance"]["awag"]["schedule"] == "drqv2_cosine"
    assert run_config(tmp_path, algorithm="sac", advisor="none").guidance.awag.schedule == "constant"


def test_ppos_advisor_term_is_a_run_config_field(tmp_path):
    bc = {"enabled": True, "coef": 0.2, "decay_end_steps": 1000, "filter": "none"}
    config = run_config(tmp_path, algorithm="ppo", guidance={"advisor_bc": bc})
    built = build_learner(config, ObsSpec(vector_dim=3), CPU)
    assert built.learner.config.advisor_bc is config.guidance.advisor_bc
    assert not built.off_policy and config.guidance.needs_advice and not config.overlaps


def test_a_run_recorded_before_advisor_bc_existed_resumes(tmp_path):
    config = run_config(tmp_path, algorithm="sac", guidance=GUIDED)
    folder = RunFolder(tmp_path / "run")
    folder.create(config)
    recorded = yaml.safe_load(folder.config.read_text())
    del recorded["guidance"]["advisor_bc"]  # as a run folder written before the field
    folder.config.write_text(yaml.safe_dump(recorded))
    folder.check_resumable_with(config)
    changed = config.model_copy(update={"guidance": config.guidance.model_copy(update={
        "advisor_bc": config.guidance.advisor_bc.model_copy(update={"coef": 0.5})})})
    with pytest.raises(ValueError, match=r"guidance\.advisor_bc\.coef: 0\.1 in the run, 0\.5 now"):
        folder.check_resumable_with(changed)

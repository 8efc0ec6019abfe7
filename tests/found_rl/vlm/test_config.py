"""Fine-tuning settings: checked counts, and the device and precision they resolve to."""

import pytest
import torch

from found_rl.devices import resolve_device
from found_rl.vlm.config import FinetuneConfig, resolve_precision


@pytest.mark.parametrize(("field", "value", "flag"), [("grad_accum", 0, "--grad-accum"), ("steps", 0, "--steps"),
                                                      ("method", "qlora", "method"), ("epochs", -1.0, "--epochs"),
                                                      ("max_minutes", 0.0, "--max-minutes"),
                                                      ("max_minutes", -2.0, "--max-minutes"),
                                                      ("max_minutes", float("nan"), "--max-minutes")])
def test_bad_settings_name_their_flag(field, value, flag):
    with pytest.raises(ValueError, match=flag):
        FinetuneConfig(data="d", model="m", out="o", **{field: value})


def test_learning_rate_defaults_by_method():
    assert FinetuneConfig(data="d", model="m", out="o").learning_rate == 2e-4
    assert FinetuneConfig(data="d", model="m", out="o", method="full").learning_rate == 1e-5


def test_mixed_precision_and_cuda_are_refused_on_a_cpu_machine(monkeypatch):
    assert resolve_precision("auto", torch.device("cpu")) is None
    with pytest.raises(ValueError, match="--precision bf16: mixed precision needs a CUDA device"):
        resolve_precision("bf16", torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ValueError, match=r"--device cuda: torch cannot use this device here \(CUDA is not available"):
        resolve_device("cuda")


def test_a_run_recorded_before_a_setting_existed_resumes_under_its_default():
    from found_rl.vlm.config import config_json, resume_changes

    current = config_json(FinetuneConfig(data="d", model="m", out="o"))
    older = {k: v for k, v in current.items() if k not in ("aux_action_weight", "vision_warmup_steps")}
    assert resume_changes(older, current) == []
    with_head = config_json(FinetuneConfig(data="d", model="m", out="o", method="full", aux_action_weight=0.5))
    assert resume_changes(older, with_head) == ["method", "learning_rate", "aux_action_weight"]

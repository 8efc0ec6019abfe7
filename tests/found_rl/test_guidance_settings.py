"""Each guidance term's settings check their own values and name the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from found_rl.guidance_settings import AdvisorBc, Awag, Guidance, GuidanceTerm, Vmr


@pytest.mark.parametrize(
    ("settings", "values", "field"),
    [
        (Vmr, {"decay_start_steps": 10, "decay_end_steps": 5}, "decay_end_steps"),
        (Vmr, {"form": "cubic"}, "form"),
        (Vmr, {"margin": float("inf")}, "finite"),
        (Awag, {"coef": float("nan")}, "finite"),
        (Awag, {"max_weight": 0.5}, "max_weight"),
        (Awag, {"schedule": "exp"}, "schedule"),
        (AdvisorBc, {"decay_start_steps": 10, "decay_end_steps": 5}, "decay_end_steps"),
        (AdvisorBc, {"filter": "sometimes"}, "filter"),
        (Vmr, {"margn": 1.0}, "margn"),
    ],
)
def test_a_bad_value_names_the_field(settings, values, field):
    with pytest.raises(ValidationError, match=field):
        settings(**values)


def test_enabled_terms_and_whether_they_read_advisor_actions():
    guidance = Guidance.model_validate({"clip_bonus": {"enabled": True}})
    assert guidance.enabled_terms == (GuidanceTerm.CLIP_BONUS,) and not guidance.needs_advice
    assert Guidance.model_validate({"advisor_bc": {"enabled": True}}).needs_advice

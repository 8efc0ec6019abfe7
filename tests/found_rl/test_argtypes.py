import argparse
from enum import Enum

import pytest

from found_rl.argtypes import SEED, enum_member, finite_float


class Colour(str, Enum):
    RED = "red"
    BLUE = "blue"


def test_enum_member_is_found_by_value():
    assert enum_member(Colour, "blue", "paint", "colour") is Colour.BLUE


@pytest.mark.parametrize("text", ["green", "RED", ""])
def test_an_unknown_value_names_the_field_the_value_and_every_allowed_one(text):
    with pytest.raises(ValueError) as raised:
        enum_member(Colour, text, "paint", "colour")
    assert str(raised.value) == f"paint: unknown colour {text!r}; allowed: red, blue"


def test_both_closed_sets_of_the_run_config_give_that_message():
    from found_rl.guidance_settings import GuidanceTerm
    from found_rl.models.ppo_nets import ActionKind

    with pytest.raises(ValueError, match=r"^guidance: unknown term 'pvp'; allowed: vmr, awag, clip_bonus, advisor_bc$"):
        GuidanceTerm.parse("pvp")
    allowed = "categorical, gaussian, beta"
    with pytest.raises(ValueError, match=rf"^action_kind: unknown distribution 'dirac'; allowed: {allowed}$"):
        ActionKind.parse("dirac")
    assert ActionKind.parse("beta") is ActionKind.BETA


@pytest.mark.parametrize("text", ["-1", "nan", "x"])
def test_bounded_numbers_refuse_what_is_out_of_bounds(text):
    with pytest.raises(argparse.ArgumentTypeError):
        SEED(text)
    with pytest.raises(argparse.ArgumentTypeError):
        finite_float(0.0, inclusive=True)(text)

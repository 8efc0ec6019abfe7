"""The settings of each guidance term, declared once: what a run config holds and a learner reads.

One frozen model per term (METHOD §1–3, §6), with its defaults and its checks. A run config
holds them under ``guidance:``; the learner that uses a term is handed the same object
(``SacConfig.vmr is run_config.guidance.vmr``), never a copy of its fields. Which learner
accepts which term is the learner registry's business (``found_rl.algos.registry``).
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from found_rl.argtypes import enum_member


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    return value


FiniteFloat = Annotated[float, BeforeValidator(_finite)]
"""a float that refuses NaN and ±inf (``ge=0`` alone lets inf through)"""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GuidanceTerm(str, Enum):
    """Guidance a learner can switch on; the value is the key under ``guidance:``."""

    VMR = "vmr"
    AWAG = "awag"
    CLIP_BONUS = "clip_bonus"
    ADVISOR_BC = "advisor_bc"
    """PPO's advisor term: advantage-gated log-likelihood of the advisor action (METHOD §6)"""

    @classmethod
    def parse(cls, name: str) -> GuidanceTerm:
        return enum_member(cls, name, "guidance", "term")


TERM_NEEDS = {
    GuidanceTerm.VMR: "VMR is a margin between Q values and needs a Q-learning critic",
    GuidanceTerm.AWAG: "AWAG weighs the advisor action by a Q advantage and needs a Q-learning critic; "
    "PPO's counterpart is advisor_bc",
    GuidanceTerm.CLIP_BONUS: "it needs a TD or GAE reward to add the bonus to",
    GuidanceTerm.ADVISOR_BC: "advisor_bc is PPO's advantage-gated advisor term; Q-learning learners use awag",
}
"""Why a learner may lack a term: the reason a refused run config is given"""


class _Decaying(_Strict):
    """A term whose coefficient decays between its ``decay_start_steps`` and ``decay_end_steps``
    (declared by the term, with its own defaults)."""

    @model_validator(mode="after")
    def _ordered(self) -> _Decaying:
        start, end = self.decay_start_steps, self.decay_end_steps  # declared by the term
        if end < start:
            raise ValueError(f"decay_end_steps ({end}) must be >= decay_start_steps ({start})")
        return self


class Vmr(_Decaying):
    """Value-Margin Regularisation (METHOD §1): the critics' margin for the advisor action.

    The coefficient λ(t) is 1 up to ``decay_start_steps`` and falls linearly to 0 at
    ``decay_end_steps`` (env steps).
    """

    enabled: bool = False
    margin: FiniteFloat = Field(2.0, ge=0, description="VMR margin m")
    form: Literal["squared", "hinge", "softplus"] = Field(
        "squared", description="the penalty: 'squared' (published), 'hinge' or 'softplus'"
    )
    margin_distance: FiniteFloat = Field(
        0.0, ge=0, description="d > 0: the margin grows with the distance between the taken and the advisor's "
        "actions, m·min(1, ‖a − aᵛ‖ / d) (DQfD's large margin: none where the taken action is the advisor's); "
        "0: the constant m (published)",
    )
    decay_start_steps: int = Field(50_000, ge=0, description="λ(t) = 1 up to this env step")
    decay_end_steps: int = Field(150_000, ge=0, description="λ(t) reaches 0 at this env step")


class Awag(_Strict):
    """Advantage-Weighted Action Guidance (METHOD §2): the actor's advisor term, Q-filtered."""

    enabled: bool = False
    coef: FiniteFloat = Field(0.01, ge=0, description="c, or its peak for the cosine schedule")
    beta: FiniteFloat = Field(2.0, gt=0, description="advantage temperature β")
    max_weight: FiniteFloat = Field(20.0, ge=1, description="weight cap w_max")
    schedule: Literal["constant", "drqv2_cosine"] = Field(
        "constant", description="c(t): 'constant' or 'drqv2_cosine' (c·½(1+cos(π·min(t/horizon_steps,1)^0.7)))"
    )
    horizon_steps: int = Field(300_000, gt=0, description="env steps until the cosine schedule reaches 0")
    filter: Literal["q", "none"] = Field(
        "q", description="'q': imitate where min Q rates the advisor's action above the policy's mode, weighted "
        "by exp(A/β) (METHOD §2); 'none': every labelled sample with weight 1 (behaviour cloning of the advisor "
        "on the visited states, DAgger's limit)",
    )
    loss: Literal["log_prob", "mode_mse"] = Field(
        "log_prob", description="what imitates: 'log_prob', −log π(aᵛ | s) of the squashed Gaussian (METHOD §2); "
        "'mode_mse', ‖tanh μ(s) − aᵛ‖², the policy's mode against the advisor's action in the action space "
        "(no pull of μ towards ±∞ for an advisor at the action bounds)",
    )
    detach_std: bool = Field(
        False, description="SAC: imitate with the policy's mean only, log π(aᵛ | s) taken with its log-std "
        "detached, so that the entropy term alone sets how wide the policy explores (docs/method.md §2)",
    )


class ClipBonus(_Strict):
    """The CLIP dense reward (METHOD §3), scored by the advisor server's CLIP backend; added to
    the learner's TD or GAE reward only."""

    enabled: bool = False


class AdvisorBc(_Decaying):
    """PPO's advisor term (docs/method.md §6): an advantage-gated log-likelihood of the advisor
    action, its coefficient c(t) = c₀ until ``decay_start_steps``, linear to 0 at ``decay_end_steps``."""

    enabled: bool = False
    coef: FiniteFloat = Field(0.1, ge=0, description="peak coefficient c₀")
    decay_start_steps: int = Field(0, ge=0, description="c(t) = c₀ up to this env step")
    decay_end_steps: int = Field(300_000, ge=0, description="c(t) reaches 0 at this env step")
    filter: Literal["negative_advantage", "none"] = Field(
        "negative_advantage", description="'negative_advantage': imitate only where the executed action's GAE "
        "advantage is < 0 and the advisor chose differently; 'none': every labelled sample",
    )


class Guidance(_Strict):
    """Every guidance term's settings (off unless enabled); a learner reads the terms it accepts."""

    vmr: Vmr = Vmr()
    awag: Awag = Awag()
    clip_bonus: ClipBonus = ClipBonus()
    advisor_bc: AdvisorBc = AdvisorBc()

    @property
    def enabled_terms(self) -> tuple[GuidanceTerm, ...]:
        """The switched-on terms, in :class:`GuidanceTerm` order."""
        return tuple(term for term in GuidanceTerm if getattr(self, term.value).enabled)

    @property
    def needs_advice(self) -> bool:
        """Whether a switched-on term reads the advisor's actions (the CLIP bonus reads scores only)."""
        return self.vmr.enabled or self.awag.enabled or self.advisor_bc.enabled

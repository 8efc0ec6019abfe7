"""Policy and value networks: BEV + state encoder, SAC and DrQ-v2 actors/critics, PPO actor-critic."""

from found_rl.models.drqv2_nets import DeterministicActor
from found_rl.models.encoders import (
    BevStateEncoder,
    EncoderConfig,
    FlatEncoder,
    NetworkConfig,
    make_encoder,
)
from found_rl.models.observation import ObsSpec, obs_spec_from_space, obs_to_tensor
from found_rl.models.policy import DrivingPolicy, PolicySpec, build_actor
from found_rl.models.ppo_nets import ActionKind, ActorCritic
from found_rl.models.sac_nets import (
    SquashedGaussianActor,
    TwinQCritic,
    squashed_gaussian_log_prob,
)

__all__ = [
    "ActionKind",
    "ActorCritic",
    "BevStateEncoder",
    "DeterministicActor",
    "DrivingPolicy",
    "EncoderConfig",
    "FlatEncoder",
    "NetworkConfig",
    "ObsSpec",
    "PolicySpec",
    "SquashedGaussianActor",
    "TwinQCritic",
    "build_actor",
    "make_encoder",
    "obs_spec_from_space",
    "obs_to_tensor",
    "squashed_gaussian_log_prob",
]

"""Observation encoders: a BEV + state network for driving and a pass-through for vectors.

The driving encoder follows Roach/Found-RL: four 3×3 stride-2 convolutions (32→64→128→256), a
1×1 convolution down to 64 channels, flatten; the state goes through an MLP (256-256); both are
fused into one feature vector (256). Every width is configurable so tests and CPU runs can use
a small network.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from found_rl.models.observation import ObsSpec, TensorObs


@dataclass(frozen=True)
class EncoderConfig:
    """Widths of the BEV + state encoder (ignored for vector observations)."""

    conv_channels: tuple[int, ...] = (32, 64, 128, 256)
    """output channels of the 3×3 stride-2 convolutions, in order"""
    bottleneck_channels: int = 64
    """channels of the 1×1 convolution before flattening"""
    state_hidden: tuple[int, ...] = (256, 256)
    """hidden widths of the state MLP"""
    features_dim: int = 256
    """width of the fused feature vector"""

    def __post_init__(self) -> None:
        for name in ("conv_channels", "state_hidden"):
            widths = getattr(self, name)
            if len(widths) == 0 or any(int(w) < 1 for w in widths):
                raise ValueError(f"EncoderConfig.{name}: expected a non-empty tuple of ints >= 1, got {widths}")
        for name in ("bottleneck_channels", "features_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"EncoderConfig.{name}: expected an int >= 1, got {getattr(self, name)}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EncoderConfig:
        return cls(
            conv_channels=tuple(data["conv_channels"]),
            bottleneck_channels=int(data["bottleneck_channels"]),
            state_hidden=tuple(data["state_hidden"]),
            features_dim=int(data["features_dim"]),
        )


def mlp(input_dim: int, hidden: tuple[int, ...], activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """Linear layers with ``activation`` after each (hidden widths only, no output layer)."""
    layers: list[nn.Module] = []
    width = input_dim
    for size in hidden:
        layers += [nn.Linear(width, size), activation()]
        width = size
    return nn.Sequential(*layers)


class BevStateEncoder(nn.Module):
    """Encodes ``{"bev": (B, C, H, W) uint8, "state": (B, S) float32}`` into ``(B, features_dim)``."""

    def __init__(
        self,
        bev_shape: tuple[int, int, int],
        state_dim: int,
        config: EncoderConfig = EncoderConfig(),
    ):
        super().__init__()
        channels, height, width = bev_shape
        layers: list[nn.Module] = []
        in_channels = channels
        for out_channels in config.conv_channels:
            layers += [
                nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=2, padding=1),
                nn.ReLU(),
            ]
            in_channels = out_channels
        layers += [
            nn.Conv2d(in_channels, config.bottleneck_channels, kernel_size=1),
            nn.ReLU(),
            nn.Flatten(),
        ]
        self.cnn = nn.Sequential(*layers)
        with torch.no_grad():
            cnn_dim = int(self.cnn(torch.zeros(1, channels, height, width)).shape[1])
        self.state_mlp = mlp(state_dim, config.state_hidden)
        self.fusion = nn.Sequential(nn.Linear(cnn_dim + config.state_hidden[-1], config.features_dim), nn.ReLU())
        self.features_dim = config.features_dim

    def forward(self, obs: TensorObs) -> torch.Tensor:
        if not isinstance(obs, dict):
            raise TypeError("BevStateEncoder: expected a dict observation with 'bev' and 'state'")
        bev = obs["bev"].float() / 255.0  # uint8 masks → [0, 1], as SB3's normalize_images
        return self.fusion(torch.cat([self.cnn(bev), self.state_mlp(obs["state"])], dim=1))


class FlatEncoder(nn.Module):
    """Pass-through for vector observations: the heads' MLPs do all the work (CleanRL layout)."""

    def __init__(self, vector_dim: int):
        super().__init__()
        self.features_dim = vector_dim

    def forward(self, obs: TensorObs) -> torch.Tensor:
        if isinstance(obs, dict):
            raise TypeError("FlatEncoder: expected a (B, D) tensor observation, got a dict")
        return obs.float()


def make_encoder(spec: ObsSpec, config: EncoderConfig = EncoderConfig()) -> nn.Module:
    """The encoder for an observation layout (BEV + state, or a flat vector)."""
    if spec.is_dict:
        return BevStateEncoder(spec.bev_shape, spec.state_dim, config)  # type: ignore[arg-type]
    return FlatEncoder(int(spec.vector_dim))  # type: ignore[arg-type]


@dataclass(frozen=True)
class NetworkConfig:
    """Encoder widths plus the hidden widths of the policy and value heads."""

    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    """BEV + state encoder widths (driving observations only)"""
    actor_hidden: tuple[int, ...] = (256, 256)
    """hidden widths of the actor head on top of the encoder features"""
    critic_hidden: tuple[int, ...] = (256, 256)
    """hidden widths of each critic head (Q or V)"""

    def __post_init__(self) -> None:
        for name in ("actor_hidden", "critic_hidden"):
            widths = getattr(self, name)
            if any(int(w) < 1 for w in widths):
                raise ValueError(f"NetworkConfig.{name}: expected ints >= 1, got {widths}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "encoder": self.encoder.to_dict(),
            "actor_hidden": list(self.actor_hidden),
            "critic_hidden": list(self.critic_hidden),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NetworkConfig:
        return cls(
            encoder=EncoderConfig.from_dict(data["encoder"]),
            actor_hidden=tuple(data["actor_hidden"]),
            critic_hidden=tuple(data["critic_hidden"]),
        )

"""Observation encoders: a BEV + state network for driving and a pass-through for vectors.

The driving encoder follows Roach/Found-RL: four 3×3 stride-2 convolutions (32→64→128→256), a
1×1 convolution down to 64 channels, flatten; the state goes through an MLP (256-256); both are
fused into one feature vector (256). Every width is configurable; :data:`NETWORK_PRESETS` names
the two configurations users pick from (``roach`` for GPUs, ``cpu`` for laptops).

The input path is kept cheap because on a CPU it dominates small networks (issue 10: turning a
uint8 BEV batch into floats cost about 80 ms of a 0.7 s SAC update): the 1/255 scale is folded
into the first convolution's weights instead of multiplying every pixel, a batch is converted
once (:meth:`BevStateEncoder.prepare`) even when several networks read it, and the ``cpu``
preset reads a BEV the renderer max-pools 4× instead of 2× (48 × 48: a quarter of the pixels
to convert and a quarter of the replay memory; :data:`PRESET_BEV_POOL`).
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
    stem_kernel: int = 3
    """kernel of the first convolution (the others are 3×3)"""
    stem_stride: int = 2
    """stride of the first convolution (the others use 2)"""

    def __post_init__(self) -> None:
        for name in ("stem_kernel", "stem_stride"):
            if getattr(self, name) < 1:
                raise ValueError(f"EncoderConfig.{name}: expected an int >= 1, got {getattr(self, name)}")
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
            # absent in checkpoints written before the presets: the Roach stem
            stem_kernel=int(data.get("stem_kernel", 3)),
            stem_stride=int(data.get("stem_stride", 2)),
        )


def mlp(input_dim: int, hidden: tuple[int, ...], activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """Linear layers with ``activation`` after each (hidden widths only, no output layer)."""
    layers: list[nn.Module] = []
    width = input_dim
    for size in hidden:
        layers += [nn.Linear(width, size), activation()]
        width = size
    return nn.Sequential(*layers)


class PixelScaledConv2d(nn.Conv2d):
    """A convolution of ``x / 255`` computed as ``x`` convolved with ``weight / 255``.

    Same result and same parameters as scaling the input, without a pass over every pixel.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(x, self.weight * (1.0 / 255.0), self.bias)


class BevStateEncoder(nn.Module):
    """Encodes ``{"bev": (B, C, H, W) uint8, "state": (B, S) float32}`` into ``(B, features_dim)``.

    A ``bev`` that is already float holds :meth:`prepare` output (unscaled 0..255).
    """

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
        for index, out_channels in enumerate(config.conv_channels):
            if index == 0:
                kernel, stride = config.stem_kernel, config.stem_stride
                padding = (kernel - stride + 1) // 2  # 3×3/2 → 1 (Roach); k×k/k patches → 0
                layers += [PixelScaledConv2d(in_channels, out_channels, kernel, stride, padding), nn.ReLU()]
            else:
                layers += [nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=2, padding=1), nn.ReLU()]
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

    def prepare(self, obs: TensorObs) -> TensorObs:
        """The BEV converted to float once, for several forward passes (values stay 0..255)."""
        if not isinstance(obs, dict):
            raise TypeError("BevStateEncoder: expected a dict observation with 'bev' and 'state'")
        if obs["bev"].dtype != torch.uint8:
            return obs
        # channels-last: oneDNN's convolutions run several times faster on it than on NCHW
        bev = obs["bev"].to(torch.float32, memory_format=torch.channels_last)  # one pass, not two
        return {"bev": bev, "state": obs["state"]}

    def forward(self, obs: TensorObs) -> torch.Tensor:
        # uint8 masks → [0, 1] as SB3's normalize_images; the 1/255 lives in the first conv
        obs = self.prepare(obs)
        return self.fusion(torch.cat([self.cnn(obs["bev"]), self.state_mlp(obs["state"])], dim=1))


class FlatEncoder(nn.Module):
    """Pass-through for vector observations: the heads' MLPs do all the work (CleanRL layout)."""

    def __init__(self, vector_dim: int):
        super().__init__()
        self.features_dim = vector_dim

    def prepare(self, obs: TensorObs) -> TensorObs:
        return obs

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


NETWORK_PRESETS: dict[str, NetworkConfig] = {
    # Roach / Found-RL widths: 87 MFLOP a frame, for GPUs.
    "roach": NetworkConfig(),
    # Small enough to learn on 2 CPU cores (issue 10): on the 48 × 48 BEV, 4×4 patches, two
    # narrow 3×3 convolutions and 128-wide heads (``found-rl bench policy --preset cpu``).
    "cpu": NetworkConfig(
        encoder=EncoderConfig(
            conv_channels=(16, 32, 32),
            bottleneck_channels=32,
            state_hidden=(64,),
            features_dim=128,
            stem_kernel=4,
            stem_stride=4,
        ),
        actor_hidden=(128, 128),
        critic_hidden=(128, 128),
    ),
}
"""Named network configurations (``found-rl train``'s ``network:``, ``bench policy --preset``)."""

PRESET_BEV_POOL: dict[str, int] = {"roach": 2, "cpu": 4}
"""The BEV max-pooling each preset is built for (``BevConfig.pool``: 192 px → 96 or 48)."""


def network_preset(name: str) -> NetworkConfig:
    """The preset called ``name``.

    Raises:
        ValueError: for an unknown name (lists the known ones).
    """
    if name not in NETWORK_PRESETS:
        raise ValueError(f"network preset: unknown {name!r}; allowed: {', '.join(NETWORK_PRESETS)}")
    return NETWORK_PRESETS[name]

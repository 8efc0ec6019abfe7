"""The learners' optimiser and target-network averaging, in their fastest exact forms.

An update of the CPU network is dominated by per-parameter Python dispatch, not arithmetic:
torch's default (for-loop) Adam issues a dozen small ops per parameter tensor and the
hand-written Polyak loop one ``lerp_`` each. The fused Adam kernel and one ``_foreach_lerp_``
compute the same values in one call.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

_FUSED_ADAM_DEVICES = ("cpu", "cuda")


def adam(params: Iterable[torch.Tensor], lr: float, **options: float) -> torch.optim.Adam:
    """``torch.optim.Adam`` with the fused kernel where every parameter's device has one."""
    params = list(params)
    fused = all(p.device.type in _FUSED_ADAM_DEVICES and p.is_floating_point() for p in params)
    return torch.optim.Adam(params, lr=lr, fused=fused or None, **options)


@torch.no_grad()
def polyak_update(online: nn.Module, target: nn.Module, tau: float) -> None:
    """θ̄ ← θ̄ + τ(θ − θ̄) for every parameter of ``target`` (same architecture as ``online``)."""
    torch._foreach_lerp_(list(target.parameters()), list(online.parameters()), tau)

"""The one torch-device resolver: ``auto`` and every ``--device`` flag or ``device`` field.

A device torch cannot use here (a typo, CUDA on a machine without it, ``cuda:9`` on a one-GPU
machine) is the user's mistake: it is refused by name before any model loads or run starts.
"""

from __future__ import annotations

import torch

from found_rl.errors import UserError


def resolve_device(name: str, *, source: str = "--device") -> torch.device:
    """The device ``name`` asks for; ``auto`` is CUDA when torch sees one, else the CPU.

    Args:
        name: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or any other torch device name.
        source: the flag or config field ``name`` came from, for the error message.

    Raises:
        UserError: if torch cannot use the device on this machine.
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"CUDA is not available on this machine; use {source} cpu or auto")
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as exc:  # torch raises AssertionError for "not compiled with CUDA"
        raise UserError(f"{source} {name}: torch cannot use this device here ({exc})") from None
    return device

"""The auxiliary action-classification head of ``vlm finetune --aux-action-weight``.

The answer loss reaches the vision tower only through a few answer tokens among ~90, and in a
30-minute CPU run it barely trains the tower; a plain image classifier over the same BEVs and
context (``found-rl clip probe``) does find the image signal. So the fine-tuning can add that
classifier's loss on the VLM's own image tokens: the projector's output (what the decoder
reads) is mean-pooled, layer-normalised, joined with a learnt embedding of the frame's context
(command x METHOD §3 speed bin, the 24 anchor groups, ``vlm_server.clip_inputs``) and mapped by
a two-layer head to the 30 action classes. The target is the expert action's class as
``vlm evaluate`` scores it (``vlm_server.answers.answer_class``). The head's last layer starts
at zero, so its first predictions are uniform, and the tower feels the head from the second
step on, once that layer has left zero.

The head belongs to the fine-tuning run (its checkpoint), never to the served model: the tap
is a forward hook on the projector, and the exported ``model/`` is the plain transformers model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from found_rl.errors import UserError
from found_rl.vlm.examples import ChatExample
from vlm_server.anchors import NUM_ACTIONS, command_index, speed_bin
from vlm_server.answers import answer_class
from vlm_server.clip_inputs import CONTEXTS

CONTEXT = CONTEXTS["command-speed"]
"""What the head reads beside the image: the frame's (command, speed bin) group."""
PROJECTOR_NAMES = ("multi_modal_projector",)
"""Leaf names of the module whose ``[B, N, D]`` output is the image tokens the decoder reads
(LLaVA, InternVL in transformers format)."""
CONTEXT_DIM = 16
HIDDEN = 128


class ActionHead(torch.nn.Module):
    """``logits = out(gelu(hidden([layer_norm(mean_n tokens), embedding(context)])))`` over the actions.

    Args:
        feature_dim: width ``D`` of the image tokens.
        num_contexts: number of context ids (``CONTEXT.size``).
        num_classes: number of action classes (``NUM_ACTIONS``).
    """

    def __init__(self, feature_dim: int, num_contexts: int = CONTEXT.size, num_classes: int = NUM_ACTIONS) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(feature_dim)
        self.context_embedding = torch.nn.Embedding(num_contexts, CONTEXT_DIM)
        self.hidden = torch.nn.Linear(feature_dim + CONTEXT_DIM, HIDDEN)
        self.out = torch.nn.Linear(HIDDEN, num_classes)
        torch.nn.init.zeros_(self.out.weight)  # start uniform, as the probe starts at its prior
        torch.nn.init.zeros_(self.out.bias)

    def forward(self, image_tokens: torch.Tensor, contexts: torch.Tensor) -> torch.Tensor:
        """``[B, C]`` logits for ``[B, N, D]`` image tokens and ``[B]`` int64 context ids."""
        pooled = self.norm(image_tokens.float().mean(dim=1))
        return self.out(F.gelu(self.hidden(torch.cat([pooled, self.context_embedding(contexts)], dim=-1))))


def action_loss(logits: torch.Tensor, classes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean cross-entropy, top-1 accuracy)`` of ``[B, C]`` logits against ``[B]`` int64 classes."""
    return F.cross_entropy(logits, classes), (logits.argmax(dim=-1) == classes).float().mean()


def action_targets(examples: Sequence[ChatExample]) -> tuple[np.ndarray, np.ndarray]:
    """``([B] context ids, [B] expert action classes)``, both int64, of ``examples``."""
    rows = np.array([command_index(e.command) for e in examples], dtype=np.int64)
    bins = np.array([speed_bin(e.speed_mps) for e in examples], dtype=np.int64)
    classes = np.array([answer_class(e.action) for e in examples], dtype=np.int64)
    return CONTEXT.ids(rows, bins), classes


def image_projector(model: torch.nn.Module, model_name: str) -> tuple[str, torch.nn.Module]:
    """``(qualified name, module)`` of the model's image projector.

    Raises:
        UserError: the model has none (naming ``--aux-action-weight`` and what was looked for).
    """
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] in PROJECTOR_NAMES:
            return name, module
    raise UserError(
        f"--aux-action-weight: model {model_name} has no image projector module named "
        f"{' or '.join(PROJECTOR_NAMES)} (a LLaVA-style VLM) whose image tokens the auxiliary head could read"
    )


class ImageTokenTap:
    """Keeps the image projector's output of the latest forward pass (a forward hook)."""

    def __init__(self, projector: torch.nn.Module) -> None:
        self._tokens: torch.Tensor | None = None
        self._handle = projector.register_forward_hook(self._keep)

    def _keep(self, module: torch.nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        self._tokens = output

    def take(self, batch_size: int) -> torch.Tensor:
        """The ``[B, N, D]`` image tokens of the latest forward pass, forgotten once taken."""
        tokens, self._tokens = self._tokens, None
        if not torch.is_tensor(tokens) or tokens.dim() != 3 or tokens.shape[0] != batch_size:
            shape = None if not torch.is_tensor(tokens) else tuple(tokens.shape)
            raise UserError(
                f"--aux-action-weight: the image projector gave {shape}, not [{batch_size}, tokens, width] "
                "image tokens (one image per sample); this model cannot take the auxiliary head"
            )
        return tokens

    def remove(self) -> None:
        self._handle.remove()

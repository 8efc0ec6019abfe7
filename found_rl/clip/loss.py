"""Losses of CLIP fine-tuning (pure torch): caption-aware contrastive, and logit-adjusted.

``contrastive``: a batch of expert frames holds many frames with the same caption (there are
only 720). The standard CLIP loss treats every other column as a negative, so it punishes the
model for matching two frames to the caption they both have. Here each distinct caption in the
batch is one text column; an image's target is its caption's column, and a caption's targets are
all the images that carry it, spread evenly.

``logit-adjusted``: the model learns only the image's evidence beyond the caption prior
(``logit_adjusted_loss``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def caption_aware_clip_loss(
    image_features: torch.Tensor,
    caption_features: torch.Tensor,
    caption_of_image: torch.Tensor,
    logit_scale: torch.Tensor | float,
) -> torch.Tensor:
    """Symmetric InfoNCE with caption-aware targets.

    Args:
        image_features: ``[B, D]`` L2-normalised image embeddings.
        caption_features: ``[U, D]`` L2-normalised embeddings of the batch's *distinct* captions.
        caption_of_image: ``[B]`` int, the row of ``caption_features`` each image carries
            (every row must be carried by at least one image).
        logit_scale: the (exponentiated) temperature.

    Returns:
        Scalar ``(image->text + text->image) / 2`` cross-entropy.
    """
    logits = logit_scale * image_features @ caption_features.T  # [B, U]
    image_to_text = F.cross_entropy(logits, caption_of_image)
    carries = F.one_hot(caption_of_image, caption_features.shape[0]).T.to(logits.dtype)  # [U, B]
    targets = carries / carries.sum(dim=1, keepdim=True)
    text_to_image = -(targets * F.log_softmax(logits.T, dim=1)).sum(dim=1).mean()
    return (image_to_text + text_to_image) / 2


def distinct_captions(caption_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(distinct ids [U], row of each item [B])``: encode each caption once per batch."""
    distinct, rows = torch.unique(caption_ids, return_inverse=True)
    return distinct, rows


def logit_adjusted_loss(
    residual_logits: torch.Tensor, log_prior: torch.Tensor, action_ids: torch.Tensor
) -> torch.Tensor:
    """Cross-entropy of ``residual + log p(a | context)`` over each frame's 30 same-context anchors.

    Logit adjustment (Menon et al. 2021) / a bias product with an image-blind model: the prior's
    log-probabilities are added to the logits, so the softmax of the sum fits p(a | image,
    context) while the network's own logits only need to carry what the prior does not,
    ``log p(a | image, context) − log p(a | context)`` up to a per-frame constant. The negatives
    of each frame are the other 29 actions of its own (command, speed) context: captions of
    other contexts differ in their command and speed words and would teach the text, not the image.

    Args:
        residual_logits: ``[B, 30]`` ``logit_scale · f(I) · T_{c,s}ᵀ`` of each frame's group.
        log_prior: ``[B, 30]`` log p(a | context) of each frame's context (constant, no gradient).
        action_ids: ``[B]`` the expert action's anchor.
    """
    return F.cross_entropy(residual_logits + log_prior, action_ids)

"""Caption-aware contrastive loss (METHOD §3 fine-tuning note), pure torch.

A batch of expert frames holds many frames with the same caption (there are only 720). The
standard CLIP loss treats every other column as a negative, so it punishes the model for
matching two frames to the caption they both have. Here each distinct caption in the batch is
one text column; an image's target is its caption's column, and a caption's targets are all the
images that carry it, spread evenly.
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

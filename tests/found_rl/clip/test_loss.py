import math

import torch
import torch.nn.functional as F

from found_rl.clip.loss import caption_aware_clip_loss, distinct_captions


def test_two_images_of_one_caption_are_positives_not_negatives():
    # captions [7, 7, 9]: images 0 and 1 share caption 7 and are embedded exactly on it
    caption_ids = torch.tensor([7, 7, 9])
    distinct, rows = distinct_captions(caption_ids)
    assert distinct.tolist() == [7, 9] and rows.tolist() == [0, 0, 1]
    captions = torch.eye(2)
    images = captions[rows]
    scale = 50.0
    loss = caption_aware_clip_loss(images, captions, rows, scale)
    # image->text: each image picks its caption among 2 columns: -log(e^s / (e^s + 1))
    i2t = math.log1p(math.exp(-scale))
    # text->image: caption 7 spreads its target over images 0 and 1 (logits s, s, 0);
    # caption 9 targets image 2 alone (logits 0, 0, s)
    t2i_7 = -math.log(math.exp(scale) / (2 * math.exp(scale) + 1))
    t2i_9 = -math.log(math.exp(scale) / (math.exp(scale) + 2))
    expected = (i2t + (t2i_7 + t2i_9) / 2) / 2
    assert abs(float(loss) - expected) < 1e-5
    # the standard CLIP loss (one column per item, diagonal targets) is at least log 2 on the
    # shared pair: it punishes the right answer
    logits = scale * images @ captions[rows].T
    standard = (F.cross_entropy(logits, torch.arange(3)) + F.cross_entropy(logits.T, torch.arange(3))) / 2
    assert float(standard) >= 2 / 3 * math.log(2) > float(loss) + 0.25


def test_perfect_alignment_is_a_minimum_of_the_caption_aware_loss():
    torch.manual_seed(0)
    rows = torch.tensor([0, 0, 1, 2, 2, 2])
    captions = F.normalize(torch.randn(3, 8), dim=-1)
    images = captions[rows].clone()
    best = caption_aware_clip_loss(images, captions, rows, 20.0)
    for _ in range(5):
        moved = F.normalize(images.detach() + 0.2 * torch.randn_like(images), dim=-1)
        assert float(caption_aware_clip_loss(moved, captions, rows, 20.0)) > float(best)

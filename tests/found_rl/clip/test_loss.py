import math

import torch
import torch.nn.functional as F

from found_rl.clip.loss import caption_aware_clip_loss, distinct_captions, logit_adjusted_loss


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


def test_logit_adjusted_loss_adds_the_log_prior_to_the_logits():
    residual = torch.tensor([[0.3, -0.2, 1.0], [0.0, 0.5, -1.0]])
    log_prior = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]))
    actions = torch.tensor([2, 0])
    expected = F.cross_entropy(residual + log_prior, actions)
    torch.testing.assert_close(logit_adjusted_loss(residual, log_prior, actions), expected)


def test_on_frames_the_prior_explains_the_residual_learns_nothing():
    """Actions drawn exactly as the prior says: the flat residual is optimal (zero gradient).

    The plain cross-entropy would instead pull the logits toward the prior, which is what an
    image-blind scorer already knows.
    """
    prior = torch.tensor([0.6, 0.3, 0.1])
    actions = torch.tensor([0] * 6 + [1] * 3 + [2])
    residual = torch.zeros(len(actions), 3, requires_grad=True)
    logit_adjusted_loss(residual, prior.log().expand(len(actions), 3), actions).backward()
    torch.testing.assert_close(residual.grad.sum(0), torch.zeros(3), atol=1e-7, rtol=0)
    plain = torch.zeros(len(actions), 3, requires_grad=True)
    F.cross_entropy(plain, actions).backward()
    assert plain.grad.sum(0).abs().max() > 0.1


def test_the_learned_residual_is_the_prior_corrected_score():
    """Fitted on a tiny batch, softmax(residual) is p(a | image, c) / p(a | c), normalised:
    the score log p(a | image, c) − log p(a | c) up to a constant per image."""
    p_given_image = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])  # two images, one context
    counts = (p_given_image * 100).round().long()  # 100 frames of each image
    images = torch.cat([torch.full((int(counts[i].sum()),), i) for i in range(2)])
    actions = torch.cat([torch.repeat_interleave(torch.arange(3), counts[i]) for i in range(2)])
    prior = torch.bincount(actions, minlength=3).float() / len(actions)
    residual = torch.zeros(2, 3, requires_grad=True)
    optimiser = torch.optim.LBFGS([residual], max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        optimiser.zero_grad()
        loss = logit_adjusted_loss(residual[images], prior.log().expand(len(actions), 3), actions)
        loss.backward()
        return loss

    optimiser.step(closure)
    score = residual.detach().log_softmax(-1)
    expected = (p_given_image.log() - prior.log()).log_softmax(-1)
    torch.testing.assert_close(score, expected, atol=1e-3, rtol=0)

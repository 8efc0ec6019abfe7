"""BEV augmentation: shift, rotation and Found-RL's choice between them."""

import torch

from found_rl.algos.augment import augment_observation, random_rotate, rotate


def test_rotation_by_quarter_turns_and_zero_is_exact_and_keeps_the_dtype():
    image = torch.arange(2 * 16, dtype=torch.uint8).reshape(2, 1, 4, 4)
    rotated = rotate(image, torch.tensor([90.0, 0.0]))
    assert rotated.dtype == torch.uint8
    assert torch.equal(rotated[0], torch.rot90(image[0], 1, (1, 2)))
    assert torch.equal(rotated[1], image[1])


def test_small_rotation_keeps_the_centre_and_fills_outside_with_zeros():
    image = torch.full((1, 1, 9, 9), 200, dtype=torch.uint8)
    rotated = rotate(image, torch.tensor([45.0]))
    assert rotated[0, 0, 4, 4] == 200
    assert rotated[0, 0, 0, 0] == 0  # the corner came from outside the image
    assert torch.equal(random_rotate(image, 0.0), image)


def test_augmentation_with_both_on_picks_one_per_call_and_leaves_vectors_alone():
    gen = torch.Generator().manual_seed(0)
    bev = torch.randint(1, 256, (8, 3, 12, 12), dtype=torch.uint8, generator=gen)
    obs = {"bev": bev, "state": torch.randn(8, 2)}
    zero_corners = 0
    for _ in range(40):
        out = augment_observation(obs, pad_px=2, rotate_deg=10.0, generator=gen)
        assert out["bev"].shape == bev.shape and out["state"] is obs["state"]
        # a shift repeats border pixels (never 0 here); a rotation brings zeros into some corner.
        zero_corners += int((out["bev"] == 0).any())
    assert 5 < zero_corners < 35
    vector = torch.randn(4, 3)
    assert augment_observation(vector, pad_px=4, rotate_deg=10.0, generator=gen) is vector

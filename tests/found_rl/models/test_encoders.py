"""The driving encoder's input path and the network presets."""

import pytest
import torch

from found_rl.models.encoders import (
    NETWORK_PRESETS,
    PRESET_BEV_POOL,
    BevStateEncoder,
    PixelScaledConv2d,
    network_preset,
)


def test_the_folded_pixel_scale_equals_scaling_the_input():
    torch.manual_seed(0)
    conv = PixelScaledConv2d(15, 8, 4, 4)
    bev = torch.randint(0, 256, (3, 15, 48, 48), dtype=torch.uint8)
    expected = torch.nn.functional.conv2d(bev.float() / 255.0, conv.weight, conv.bias, stride=4)
    torch.testing.assert_close(conv(bev.float()), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("preset", sorted(NETWORK_PRESETS))
def test_a_prepared_batch_encodes_like_the_raw_one(preset):
    side = 192 // PRESET_BEV_POOL[preset]
    encoder = BevStateEncoder((15, side, side), 10, network_preset(preset).encoder)
    obs = {"bev": torch.randint(0, 256, (2, 15, side, side), dtype=torch.uint8), "state": torch.randn(2, 10)}
    prepared = encoder.prepare(obs)
    assert prepared["bev"].dtype == torch.float32 and encoder.prepare(prepared) is prepared
    torch.testing.assert_close(encoder(prepared), encoder(obs))


def test_unknown_presets_are_named():
    with pytest.raises(ValueError, match="unknown 'gpu'; allowed: roach, cpu"):
        network_preset("gpu")

import asyncio

import numpy as np
import pytest
import torch

from vlm_server.anchors import anchor_captions
from vlm_server.app import create_app
from vlm_server.backends.base import ClipItem
from vlm_server.backends.clip import OpenClipScorer
from vlm_server.client import clip_payload


def probs_with(entries: dict[int, float]) -> np.ndarray:
    """30 probabilities: the given entries, the rest sharing what is left equally."""
    probs = np.full(30, (1.0 - sum(entries.values())) / (30 - len(entries)))
    for index, value in entries.items():
        probs[index] = value
    return probs


def test_bonus_matches_a_hand_computed_example(monkeypatch):
    scorer = OpenClipScorer(model_name="unused", pretrained=None, image_size=8)
    # Text anchor k of every (command, speed) cell is the unit vector e_k, and the logit scale
    # is 1, so image features log(p) give softmax == p exactly.
    scorer.text_anchors = torch.eye(30).expand(6, 4, 30, 30).clone()
    scorer.logit_scale = 1.0
    wanted = [
        probs_with(
            {15: 0.4, 10: 0.3, 7: 0.2}
        ),  # acc 0.5 straight -> idx 15; 10 is a neighbour; m = 0.4-0.2
        probs_with(
            {1: 0.25, 7: 0.35, 20: 0.3}
        ),  # brake hard, right sharply -> idx 1; 7 neighbour; m = 0
        probs_with({26: 0.9}),  # idling (5), right sharply (1) -> 26; m = 0.9 - 0.1/29
        probs_with({15: 0.5, 3: 0.2}),  # m = 0.3
    ]
    features = torch.tensor(np.log(np.stack(wanted)), dtype=torch.float32)
    monkeypatch.setattr(scorer, "image_features", lambda images: features)
    image = np.zeros((8, 8, 3), np.uint8)
    items = [
        ClipItem("a", image, 4, 3.0, (0.5, 0.0)),
        ClipItem("b", image, 1, 0.0, (-0.7, 0.4)),
        ClipItem("c", image, -1, 9.0, (0.02, 0.35)),
        ClipItem("d", image, 6, 1.0, (0.6, 0.01)),
    ]
    results = scorer.score_batch(items)

    margins = [0.2, 0.0, 0.9 - 0.1 / 29, 0.3]
    assert [r.margin for r in results] == pytest.approx(margins, abs=1e-6)
    assert results[0].bonus == 0.0  # one sample: zero variance -> z = 0
    assert results[1].bonus == pytest.approx(-0.25)  # mean 0.1, std 0.1 -> z = -1
    assert results[2].bonus == pytest.approx(0.25)  # z = 1.38, clipped to 1
    m = np.array(margins)
    z = (m[3] - m.mean()) / np.sqrt(
        m.var() + 1e-8
    )  # population variance over all 4 samples
    assert z == pytest.approx(-0.1471, abs=1e-3)
    assert results[3].bonus == pytest.approx(0.25 * z, abs=1e-6)
    assert results[3].stats == pytest.approx(
        {"count": 4, "mean": m.mean(), "var": m.var()}
    )


def test_tiny_model_anchors_are_720_normalised_captions_in_grid_order(tiny_clip_scorer):
    import open_clip

    anchors = tiny_clip_scorer.text_anchors
    assert anchors.shape == (6, 4, 30, 16)
    torch.testing.assert_close(anchors.norm(dim=-1), torch.ones(6, 4, 30))
    caption = anchor_captions()[(2 * 4 + 1) * 30 + 17]
    tokenizer = open_clip.get_tokenizer(tiny_clip_scorer.model_name)
    with torch.inference_mode():
        direct = torch.nn.functional.normalize(
            tiny_clip_scorer.model.encode_text(tokenizer([caption])), dim=-1
        )[0]
    torch.testing.assert_close(anchors[2, 1, 17], direct, atol=1e-5, rtol=1e-4)


def test_tiny_model_scores_a_batch(tiny_clip_scorer, rgb):
    items = [
        ClipItem(str(i), rgb(64, 64, seed=i), 1 + i % 6, float(i), (0.3, -0.2))
        for i in range(5)
    ]
    probs = tiny_clip_scorer.anchor_probabilities(items)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    results = tiny_clip_scorer.score_batch(items)
    assert all(0.0 <= r.margin <= 1.0 and -0.25 <= r.bonus <= 0.25 for r in results)


async def test_clip_endpoint_with_the_tiny_model(
    aiohttp_client, tiny_clip_scorer, server_config, rgb
):
    app = create_app(server_config(advisor=None), clip_backend=tiny_clip_scorer)
    client = await aiohttp_client(app)
    while (await client.get("/readyz")).status != 200:
        await asyncio.sleep(0.01)
    count_before = tiny_clip_scorer.stats.snapshot().count
    items = [
        {**clip_payload(rgb(64, 64, seed=i), 4, 2.5, (0.9, 0.0), "png"), "id": f"c{i}"}
        for i in range(3)
    ]
    response = await client.post("/v1/clip/score", json={"items": items})
    assert response.status == 200
    replies = (await response.json())["items"]
    assert [r["id"] for r in replies] == ["c0", "c1", "c2"]
    assert [r["stats"]["count"] for r in replies] == [
        count_before + 1,
        count_before + 2,
        count_before + 3,
    ]
    wrong_size = {**clip_payload(rgb(32, 32), 4, 2.5, (0.9, 0.0)), "id": "w"}
    assert (await client.post("/v1/clip/score", json=wrong_size)).status == 400


def test_a_clip_item_must_send_the_history_its_backend_reads(rgb):
    from pydantic import ValidationError

    from vlm_server.schemas import ClipItemBody

    image = rgb(8, 8)
    with_history = {**clip_payload(image, 4, 2.5, (0.9, 0.0), history=[image] * 3), "id": "h"}
    item = ClipItemBody.model_validate(with_history, context={"history_frames": 3}).to_item()
    assert len(item.history) == 3 and item.history[0].shape == (8, 8, 3)
    without = {**clip_payload(image, 4, 2.5, (0.9, 0.0)), "id": "h"}
    assert ClipItemBody.model_validate(without, context={}).to_item().history == ()
    with pytest.raises(ValidationError, match=r"history: this backend's model reads 3 past BEV frame\(s\).*got 0"):
        ClipItemBody.model_validate(without, context={"history_frames": 3})

"""What an advice request carries: the privileged expert gets its state; any other advisor
(a served VLM, an OpenAI-compatible upstream) the image and the prompt's fields alone.

The body is built through the real path: the run config → the trainer's choice → the training
env's ``AdviceInfo`` on a scripted world → ``AdvisorLink`` → the item the client sends.
"""

import numpy as np
import pytest

from found_rl.env import DrivingEnv
from found_rl.scenario import parse_scenario
from found_rl.train.config import validate_run_config
from found_rl.train.envs import ADVICE_KEY, AdviceInfo
from found_rl.train.labels import AdvisorLink
from found_rl.train.loop import Trainer
from tests.scenes import ScriptedBackend
from vlm_server.images import encode_image
from vlm_server.schemas import AdviseItemBody

from .conftest import tiny_run_config

SCENARIO = parse_scenario(
    {"map": {"generate": {"type": "grid"}}, "routes": {"random_length_m": 100}, "episode": {"max_steps": 300}}
)


class CapturingClient:
    """Keeps every item as the background client sends it (``{**payload, "id": id}``)."""

    def __init__(self) -> None:
        self.items: list[dict] = []

    def submit(self, item_id, payload, kind="advise"):
        self.items.append({**payload, "id": str(item_id)})

    def submit_many(self, items):
        for item in items:
            self.submit(*item)

    def poll(self, wait_s=0.0):
        return []

    def close(self):
        pass


def request_item(tmp_path, advisor: dict) -> tuple[dict, dict]:
    """The ``/v1/advise`` item about the first observation of a run with ``advisor``, and that advice."""
    config = validate_run_config(tiny_run_config(advisor=advisor, guidance={"vmr": {"enabled": True}}),
                                 "test", tmp_path)
    wants = Trainer(config, tmp_path / "run", show_progress=False)._wants()
    env = AdviceInfo(DrivingEnv(SCENARIO, backend=ScriptedBackend(num_routes=1), observation="bev",
                                render_mode="rgb_array"), state=wants.state, with_image=wants.image)
    _, info = env.reset(seed=0)
    env.close()
    advice = info[ADVICE_KEY]
    client = CapturingClient()
    link = AdvisorLink(client, want_actions=wants.actions, want_clip=wants.clip)
    link.submit((0, 0, 0), advice, np.zeros(2, np.float32), 0)
    (item,) = client.items
    AdviseItemBody.model_validate(item)  # what the server accepts
    return item, advice


def test_a_served_vlm_is_sent_the_image_and_the_prompt_fields_only(tmp_path):
    item, advice = request_item(tmp_path, {"spawn": "hf", "spawn_options": {"model": str(tmp_path / "vlm")}})
    assert item == {
        "id": "a:0.0.0",
        "command": advice["command"],
        "speed_mps": advice["speed_mps"],
        "image": encode_image(advice["image"]),
        "state": {"target_ego_xy": advice["state"]["target_ego_xy"]},  # the prompt's next-target line
    }
    assert len(item["state"]["target_ego_xy"]) == 2


@pytest.mark.parametrize("advisor", [{"urls": ["http://127.0.0.1:1"]}, {"spawn": "fixed-cost"}])
def test_any_advisor_but_the_expert_sees_nothing_privileged(tmp_path, advisor):
    item, _ = request_item(tmp_path, advisor)
    assert set(item) == {"id", "command", "speed_mps", "image", "state"}
    assert set(item["state"]) == {"target_ego_xy"}


@pytest.mark.parametrize("advisor", [{"spawn": "expert"}, {"urls": ["http://127.0.0.1:1"], "send_image": False}])
def test_the_expert_is_sent_its_privileged_state_and_no_image(tmp_path, advisor):
    item, advice = request_item(tmp_path, advisor)
    assert set(item) == {"id", "command", "speed_mps", "state"}
    assert item["state"] == advice["state"]
    assert {"route_ego", "target_ego_xy"} <= set(item["state"])  # the whole ExpertObservation.to_dict()

"""Text targets of an expert sample: the CLIP caption and the VLM chat pair.

The caption is built from ``vlm_server.anchors`` (METHOD §3), so a fine-tuning caption is
character for character one of the server's 720 CLIP anchors. The chat prompt is the advisor
server's own (``vlm_server.answers.build_prompt``: speed, next-target vector in the ego frame,
command), so a VLM fine-tuned on this data sees at RL time exactly what it was trained on; the
answer is the expert's action as ``{"throttle": .., "steer": .., "brake": ..}`` rounded to two
decimals, which ``vlm_server.actions.controls_to_action`` maps back to ``(acc, steer)``.

The prompt's speed is ``prompt_speed_mps``, the one definition the collected data and the
training env's advice requests both use: what the model reads at RL time is what it was
trained on, down to the sign.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from vlm_server.anchors import (
    COMMAND_PHRASES,
    LAT_PHRASES,
    LON_PHRASES,
    SPEED_PHRASES,
    TEMPLATE,
    action_class,
    command_index,
    speed_bin,
)
from vlm_server.answers import answer_controls, build_prompt

if TYPE_CHECKING:
    from found_rl.world import EgoState

IMAGE_TOKEN = "<image>\n"
"""Where the image goes in a LLaVA/InternVL-style conversation turn."""


def prompt_speed_mps(ego: EgoState) -> float:
    """The speed an advisor's prompt (and CLIP speed bin) states: forward speed, m/s, signed.

    Forward speed (velocity along the heading, negative when rolling backwards) is what the
    state vector's ``velocity_forward_mps`` and the expert's observation use; ``|v|`` would call
    a car that slides backwards at 2 m/s "moving slowly forward" and differ from the data.
    """
    return float(ego.forward_speed_mps)


def clip_caption(command: int, speed_mps: float, acc: float, steer: float) -> str:
    """The METHOD §3 caption of action ``(acc, steer)`` under ``command`` at forward ``speed_mps``."""
    lon, lat = action_class(acc, steer)
    return TEMPLATE.format(
        cmd=COMMAND_PHRASES[command_index(command)],
        spd=SPEED_PHRASES[speed_bin(speed_mps)],
        lon=LON_PHRASES[lon],
        lat=LAT_PHRASES[lat],
    )


def chat_prompt(speed_mps: float, target_ego: tuple[float, float], command: int) -> str:
    """The advisor server's own prompt (``vlm_server.answers.build_prompt``) after the image token.

    ``target_ego`` is the next route target (x forward, y right) in metres.
    """
    state = {"target_ego_xy": [float(target_ego[0]), float(target_ego[1])]}
    return IMAGE_TOKEN + build_prompt(command, speed_mps, state)


def chat_answer(acc: float, steer: float) -> str:
    """The expert action as the JSON answer a VLM is trained to emit (keys in this order)."""
    throttle, steer, brake = answer_controls(acc, steer)
    return json.dumps({"throttle": throttle, "steer": steer, "brake": brake})


def chat_sample(
    speed_mps: float, target_ego: tuple[float, float], command: int, acc: float, steer: float
) -> dict:
    """One conversation in the LLaVA/InternVL ``conversations`` layout."""
    return {
        "conversations": [
            {"from": "human", "value": chat_prompt(speed_mps, target_ego, command)},
            {"from": "gpt", "value": chat_answer(acc, steer)},
        ]
    }

"""The VLM's chat examples in an expert dataset, and their split into training and held-out episodes.

Only the members a VLM needs are read from the shards (``png``, ``json``, ``chat.json``; the
masks are skipped), and images stay PNG-encoded until a batch needs them, so a 100k-sample
dataset fits in a few hundred MB. The split is by whole episodes: consecutive frames of one
episode are nearly identical, so a frame-level split would score memorisation, not driving.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from found_rl.dataset.metadata import town_fields
from found_rl.dataset.shards import read_manifest
from found_rl.dataset.text import IMAGE_TOKEN
from found_rl.errors import MissingPathError, UserError

SPLITS = ("train", "eval", "all", "other-towns")
"""``other-towns`` scores every sample, like ``all``, and checks that none of its road networks
were in the model's training data (``found_rl.dataset.town_overlap``)."""


@dataclass(frozen=True)
class ChatExample:
    """One expert frame as a VLM conversation.

    Attributes:
        key: sample key in its shard.
        png: the RGB BEV, PNG-encoded (decode with ``image()``).
        prompt: the user text after the image, exactly the server's ``build_prompt`` output.
        answer: the expert's JSON answer ``{"throttle": .., "steer": .., "brake": ..}``.
        command: RoadOption value.
        speed_mps: ego forward speed.
        target_ego: next route target ``(x forward, y right)``, metres.
        action: the expert ``(acc, steer)`` the answer encodes (unrounded).
        episode: episode index within the collection run (within the union, for several datasets).
        town: readable town name (``meta["town"]``); None in datasets that predate it.
        network: content hash of the town's road network (``meta["network"]``); None likewise.
    """

    key: str
    png: bytes
    prompt: str
    answer: str
    command: int
    speed_mps: float
    target_ego: tuple[float, float]
    action: tuple[float, float]
    episode: int
    town: str | None = None
    network: str | None = None

    def image(self) -> np.ndarray:
        """``(H, W, 3)`` uint8 RGB."""
        import cv2

        bgr = cv2.imdecode(np.frombuffer(self.png, np.uint8), cv2.IMREAD_COLOR)
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)

    @property
    def state(self) -> dict[str, list[float]]:
        """What an advice request carries for the prompt (``vlm_server.answers.build_prompt``)."""
        return {"target_ego_xy": [float(self.target_ego[0]), float(self.target_ego[1])]}


def load_chat_examples(directory: str | Path) -> list[ChatExample]:
    """Every chat example of the dataset in ``directory``, in write order.

    Raises:
        FileNotFoundError: no manifest (not an ``expert collect`` folder) or a missing shard.
        ValueError: no samples, or a sample without a well-formed chat member; the message
            names the shard and sample.
    """
    directory = Path(directory)
    manifest = read_manifest(directory)
    examples: list[ChatExample] = []
    for shard in manifest["shards"]:
        path = directory / shard["name"]
        if not path.is_file():
            raise MissingPathError(f"--data {directory}: shard {shard['name']} listed in the manifest is missing")
        examples.extend(_read_shard(path))
    if not examples:
        raise UserError(
            f"--data {directory}: the dataset has no chat samples (manifest lists {manifest['num_samples']} "
            "samples); collect some with `found-rl expert collect --steps N --out DIR`"
        )
    return examples


def load_datasets(directories: Sequence[str | Path]) -> list[ChatExample]:
    """The chat examples of several datasets as one set, in the order given.

    Each collection numbers its episodes from 0, so dataset ``k``'s episodes are shifted past
    those of the datasets before it: an episode stays whole on one side of the split. One
    folder reads exactly as :func:`load_chat_examples`.

    Raises:
        As :func:`load_chat_examples`, naming the folder.
    """
    examples: list[ChatExample] = []
    offset = 0
    for directory in directories:
        part = load_chat_examples(directory)
        examples.extend(replace(example, episode=example.episode + offset) for example in part)
        offset += max(example.episode for example in part) + 1
    return examples


def _read_shard(path: Path) -> Iterable[ChatExample]:
    groups: dict[str, dict[str, bytes]] = {}
    with tarfile.open(path, "r") as tar:
        for member in tar:
            key, _, suffix = member.name.partition(".")
            if member.isfile() and suffix in ("png", "json", "chat.json"):
                handle = tar.extractfile(member)
                groups.setdefault(key, {})[suffix] = handle.read() if handle is not None else b""
    for key, group in groups.items():
        yield _example(path, key, group)


def _example(path: Path, key: str, group: dict[str, bytes]) -> ChatExample:
    where = f"{path}: sample {key}"
    missing = sorted({"png", "json", "chat.json"} - set(group))
    if missing:
        no_chat = (
            "; it has no chat turn, so there is nothing to train a VLM on: collect the data with "
            "`found-rl expert collect`, which writes one per sample"
            if "chat.json" in missing else ""
        )
        raise UserError(f"{where}: lacks {', '.join(missing)} (a chat sample needs png, json and chat.json){no_chat}")
    try:
        chat = json.loads(group["chat.json"])
        human, gpt = chat["conversations"]
        prompt, answer = str(human["value"]), str(gpt["value"])
        metadata = json.loads(group["json"])
        acc, steer = (float(v) for v in metadata["action"])
        target_x, target_y = (float(v) for v in metadata["target_ego"])
        meta = metadata.get("meta", {})
        town, network = town_fields(meta)
        example = ChatExample(
            key=key,
            png=group["png"],
            prompt=prompt.removeprefix(IMAGE_TOKEN),
            answer=answer,
            command=int(metadata["command"]),
            speed_mps=float(metadata["speed_mps"]),
            target_ego=(target_x, target_y),
            action=(acc, steer),
            episode=int(meta.get("episode", 0)),
            town=town,
            network=network,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(
            f"{where}: malformed chat sample ({type(exc).__name__}: {exc}); expected chat.json "
            '{"conversations": [{"from": "human", ...}, {"from": "gpt", ...}]} and json with action, '
            "command, speed_mps, target_ego"
        ) from None
    if not prompt.startswith(IMAGE_TOKEN):
        raise UserError(f"{where}: the human turn does not start with the image token {IMAGE_TOKEN!r}")
    return example


def split_episodes(episodes: Iterable[int], eval_fraction: float, seed: int) -> tuple[set[int], set[int]]:
    """``(train, held_out)`` episode ids: a seeded shuffle, at least one episode held out when asked.

    Raises:
        ValueError: ``eval_fraction`` outside ``[0, 1)``, or too few episodes to hold any out.
    """
    if not 0.0 <= eval_fraction < 1.0:
        raise UserError(f"--eval-fraction must be in [0, 1), got {eval_fraction}")
    unique = sorted(set(episodes))
    if eval_fraction == 0.0:
        return set(unique), set()
    if len(unique) < 2:
        raise UserError(
            f"--eval-fraction {eval_fraction}: the dataset has {len(unique)} episode(s), so none can be held "
            "out for evaluation while training on the rest; collect more steps or pass --eval-fraction 0"
        )
    order = np.random.default_rng(seed).permutation(len(unique))
    held_out_count = min(len(unique) - 1, max(1, round(eval_fraction * len(unique))))
    held_out = {unique[i] for i in order[:held_out_count]}
    return set(unique) - held_out, held_out


def select_split(examples: Sequence[ChatExample], split: str, eval_fraction: float, seed: int) -> list[ChatExample]:
    """The examples of ``split`` (``train``, ``eval``, ``all`` or ``other-towns``) under the episode split."""
    if split not in SPLITS:
        raise UserError(f"--split must be one of {', '.join(SPLITS)}, got {split!r}")
    if split in ("all", "other-towns"):
        return list(examples)
    train, held_out = split_episodes((e.episode for e in examples), eval_fraction, seed)
    chosen = train if split == "train" else held_out
    return [e for e in examples if e.episode in chosen]

"""Expert shards as CLIP training frames: BEV images at the model's side, caption ids, episodes, towns.

Only the ``png``, ``txt`` and ``json`` members are read (the masks and chat are not needed).
Every caption must be one of the 720 METHOD §3 anchors, so a frame's caption id also gives the
(command, speed bin) group the scorer conditions on and the expert's action among its 30.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import cv2
import numpy as np

from found_rl.dataset.metadata import town_fields
from found_rl.dataset.shards import MANIFEST_NAME, iter_members, read_manifest
from found_rl.errors import MissingPathError, UserError
from found_rl.world import STEP_S
from vlm_server.anchors import NUM_ACTIONS, SPEED_PHRASES, anchor_captions
from vlm_server.clip_inputs import DEFAULT_IMAGE_INPUT, image_input_named
from vlm_server.clip_preprocess import resize_area

CAPTION_IDS: dict[str, int] = {caption: index for index, caption in enumerate(anchor_captions())}
RESIZE_CHUNK = 512
CACHE_VERSION = 3  # 2: episode steps cached too; 3: towns


@dataclass(frozen=True)
class ClipFrames:
    """Frames of an expert dataset.

    Images live once in ``pool``; each frame names the pool rows of what its image tower reads
    (``stack_rows``: one row, or the frames at the image input's ages, oldest first), so a
    subset, a shuffle of images among frames and the history stacks all share one array.

    Attributes:
        pool: ``[P, S, S, 3]`` uint8 RGB BEV, area-resized to the model's side S.
        stack_rows: ``[N, T]`` pool rows of each frame's input (T frames; the last is o_t).
        caption_ids: ``[N]`` int64 index into ``anchor_captions()`` (the expert action's caption).
        episodes: ``[N]`` int64 episode index of each frame (the unit of the held-out split).
        input_size: side of the BEV images in the shards (what a client sends the server), px.
        towns: ``[N]`` str, each frame's ``meta["town"]``, "" where its dataset did not record it
            (None: frames made without towns).
        networks: ``[N]`` str, each frame's road-network hash ``meta["network"]``, "" likewise.
    """

    pool: np.ndarray
    stack_rows: np.ndarray
    caption_ids: np.ndarray
    episodes: np.ndarray
    input_size: int
    towns: np.ndarray | None = None
    networks: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.caption_ids)

    @property
    def images(self) -> np.ndarray:
        """``[N, S, S, 3]`` the RGB BEV of each frame's o_t."""
        return self.pool[self.stack_rows[:, -1]]

    def inputs(self, index: np.ndarray | slice) -> np.ndarray:
        """What the image tower reads for ``frames[index]``: ``[B, S, S, 3]``, or ``[B, T, S, S, 3]`` stacks."""
        rows = self.stack_rows[index]
        return self.pool[rows[:, 0]] if rows.shape[1] == 1 else self.pool[rows]

    @property
    def groups(self) -> np.ndarray:
        """``[N]`` (command, speed bin) group of each frame: ``command_row * 4 + speed_bin``."""
        return self.caption_ids // NUM_ACTIONS

    @property
    def command_rows(self) -> np.ndarray:
        return self.caption_ids // (NUM_ACTIONS * len(SPEED_PHRASES))

    @property
    def speed_bins(self) -> np.ndarray:
        return self.groups % len(SPEED_PHRASES)

    @property
    def action_ids(self) -> np.ndarray:
        """``[N]`` the expert action's anchor in ``[0, 30)``."""
        return self.caption_ids % NUM_ACTIONS

    def subset(self, mask: np.ndarray) -> ClipFrames:
        rows, captions, episodes = self.stack_rows[mask], self.caption_ids[mask], self.episodes[mask]
        towns = None if self.towns is None else self.towns[mask]
        networks = None if self.networks is None else self.networks[mask]
        return ClipFrames(self.pool, rows, captions, episodes, self.input_size, towns, networks)

    def with_inputs_of(self, order: np.ndarray) -> ClipFrames:
        """The same frames (captions, episodes, towns) with frame ``i`` reading the input of frame ``order[i]``."""
        return replace(self, stack_rows=self.stack_rows[order])


def stack_rows_for(episodes: np.ndarray, steps: np.ndarray, ages_s: tuple[float, ...]) -> np.ndarray:
    """``[N, T]`` per frame, the frame of its episode at each age (seconds before it, oldest first).

    Each age takes the newest frame at least that old; early in an episode, ages older than the
    episode take its first frame, as the policy's BEV history does (``found_rl.bev.history``).
    """
    offsets = np.asarray([round(age / STEP_S) for age in ages_s], dtype=np.int64)
    longest = int(offsets.max(initial=0))
    order = np.lexsort((steps, episodes))  # by episode, then step
    span = int(steps.max(initial=0)) + longest + 1  # keys of one episode never reach the next's
    keys = episodes[order] * span + steps[order] + longest  # increasing
    first_in_episode = np.searchsorted(episodes[order], episodes, side="left")
    rows = np.empty((len(episodes), len(offsets)), dtype=np.int64)
    for column, offset in enumerate(offsets):
        wanted = episodes * span + steps + longest - offset
        newest_at_or_before = np.searchsorted(keys, wanted, side="right") - 1
        rows[:, column] = order[np.maximum(newest_at_or_before, first_in_episode)]
    return rows


def cache_root() -> Path:
    """``$FOUND_RL_CACHE/clip-frames`` (default ``~/.cache/found-rl/clip-frames``)."""
    return Path(os.environ.get("FOUND_RL_CACHE", Path.home() / ".cache" / "found-rl")) / "clip-frames"


def load_frames(
    directory: str | Path,
    image_size: int,
    max_frames: int | None = None,
    show_progress: bool = True,
    use_cache: bool = True,
    image_input: str = DEFAULT_IMAGE_INPUT,
) -> ClipFrames:
    """Read an expert dataset (``found-rl expert collect --out``) for CLIP, decoded once and cached.

    Decoding tens of thousands of PNGs takes minutes on a loaded CPU, and fine-tuning and
    evaluation read the same frames: the decoded, resized arrays are kept under
    ``cache_root()``, keyed by the manifest's hash, the image size and ``max_frames``.

    Args:
        directory: the dataset folder (with ``manifest.json``).
        image_size: the model's input side; BEVs are area-resized to it.
        max_frames: read only the first this many frames (quick runs).
        show_progress: draw a progress bar.
        use_cache: read and write the cache (off: always decode the shards).
        image_input: what each frame's input stacks (``vlm_server.clip_inputs.IMAGE_INPUTS``).

    Raises:
        FileNotFoundError: no manifest, or a shard it lists is missing (named).
        ValueError: an empty dataset, a corrupt shard, a sample without image, caption or
            episode, or a caption that is not one of the 720 anchors (shard and key named).
    """
    ages_s = image_input_named(image_input, "--image-input").ages_s
    directory = Path(directory)
    manifest = read_manifest(directory)
    fingerprint = hashlib.sha256((directory / MANIFEST_NAME).read_bytes()).hexdigest()[:16]
    cache = cache_root() / f"v{CACHE_VERSION}-{fingerprint}-{image_size}px-{max_frames or 'all'}"
    if use_cache and (cache / "meta.json").is_file():
        meta = json.loads((cache / "meta.json").read_text())
        arrays = {name: np.load(cache / f"{name}.npy") for name in CACHED_ARRAYS}
        input_size = int(meta["input_size"])
    else:
        arrays, input_size = _decode_dataset(directory, manifest, image_size, max_frames, show_progress)
        if use_cache:
            _write_cache(cache, arrays, input_size)
    stack_rows = stack_rows_for(arrays["episodes"], arrays["steps"], ages_s)
    return ClipFrames(
        arrays["images"], stack_rows, arrays["caption_ids"], arrays["episodes"], input_size,
        arrays["towns"], arrays["networks"],
    )


CACHED_ARRAYS = ("images", "caption_ids", "episodes", "steps", "towns", "networks")


def _write_cache(cache: Path, arrays: dict[str, np.ndarray], input_size: int) -> None:
    """Write the arrays into a temporary folder and rename it into place (never half a cache)."""
    tmp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        for name in CACHED_ARRAYS:
            np.save(tmp / f"{name}.npy", arrays[name])
        (tmp / "meta.json").write_text(json.dumps({"input_size": input_size}))
        os.replace(tmp, cache)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # the cache is an optimisation: a failure costs only time


def _decode_dataset(
    directory: Path, manifest: dict, image_size: int, max_frames: int | None, show_progress: bool
) -> tuple[dict[str, np.ndarray], int]:
    from tqdm import tqdm

    shards = manifest.get("shards") or []
    total = sum(int(shard.get("samples", 0)) for shard in shards)
    if total == 0:
        raise UserError(f"--data {directory}: the dataset has no samples (manifest lists {len(shards)} shards)")
    wanted = total if max_frames is None else min(total, max_frames)
    images = np.empty((wanted, image_size, image_size, 3), np.uint8)
    caption_ids = np.empty(wanted, np.int64)
    episodes = np.empty(wanted, np.int64)
    steps = np.empty(wanted, np.int64)
    towns: list[str] = []
    networks: list[str] = []
    seen_in_episode: dict[int, int] = {}
    pending: list[np.ndarray] = []
    input_size: int | None = None
    count = 0
    with tqdm(total=wanted, unit="frame", desc="load", disable=not show_progress) as bar:
        for shard in shards:
            path = directory / shard["name"]
            if not path.is_file():
                raise MissingPathError(f"shard {path} is listed in the manifest but missing")
            for key, members in iter_members(path):
                image, caption_ids[count], episode, step, (town, network) = _decode(path, key, members)
                episodes[count] = episode
                towns.append(town or "")
                networks.append(network or "")
                steps[count] = seen_in_episode.get(episode, 0) if step is None else step
                seen_in_episode[episode] = seen_in_episode.get(episode, 0) + 1
                if input_size is None:
                    input_size = image.shape[0]
                if image.shape != (input_size, input_size, 3):
                    raise UserError(
                        f"shard {path}: sample {key}: BEV is {image.shape[1]}x{image.shape[0]}, "
                        f"the dataset's first was {input_size}x{input_size}"
                    )
                pending.append(image)
                count += 1
                if len(pending) == RESIZE_CHUNK or count == wanted:
                    images[count - len(pending) : count] = resize_area(np.stack(pending), image_size).numpy()
                    bar.update(len(pending))
                    pending = []
                if count == wanted:
                    break
            if count == wanted:
                break
    if count < wanted:
        raise UserError(f"--data {directory}: manifest promises {total} samples, the shards hold {count}")
    assert input_size is not None
    arrays = {
        "images": images, "caption_ids": caption_ids, "episodes": episodes, "steps": steps,
        "towns": np.asarray(towns, dtype=str), "networks": np.asarray(networks, dtype=str),
    }
    return arrays, input_size


def _decode(
    path: Path, key: str, members: dict[str, bytes]
) -> tuple[np.ndarray, int, int, int | None, tuple[str | None, str | None]]:
    """``(RGB image, caption id, episode, step or None, (town, network))`` of one sample.

    Errors name the shard and key; town and network are None in datasets that predate them.
    """
    where = f"shard {path}: sample {key}"
    missing = {"png", "txt", "json"} - set(members)
    if missing:
        raise UserError(f"{where}: lacks members {sorted(missing)}")
    bgr = cv2.imdecode(np.frombuffer(members["png"], np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:
        raise UserError(f"{where}: png is not a readable image")
    try:
        caption = members["txt"].decode()
    except UnicodeDecodeError:
        raise UserError(f"{where}: txt is not UTF-8 text") from None
    caption_id = CAPTION_IDS.get(caption.strip())
    if caption_id is None:
        raise UserError(
            f"{where}: caption {caption[:120]!r} is not one of the 720 METHOD §3 anchors "
            "(template: 'Command is to {cmd}. {spd}. Action behavior: The car is {lon} and {lat}.')"
        )
    try:
        meta = json.loads(members["json"])["meta"]
        episode = int(meta["episode"])
    except (ValueError, KeyError, TypeError):
        raise UserError(f"{where}: json has no integer meta.episode") from None
    step = meta.get("step")
    if step is not None and not isinstance(step, int):
        raise UserError(f"{where}: json meta.step is {step!r}, not an integer")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), caption_id, episode, step, town_fields(meta)


@dataclass(frozen=True)
class EpisodeSplit:
    """Which episodes are held out (never trained on)."""

    held_out: tuple[int, ...]

    def held_out_mask(self, episodes: np.ndarray) -> np.ndarray:
        return np.isin(episodes, np.asarray(self.held_out, dtype=np.int64))


def split_by_episode(episodes: np.ndarray, held_out_fraction: float, seed: int, source: str) -> EpisodeSplit:
    """Hold out a random ``held_out_fraction`` of the episodes (at least one, never all).

    Splitting frames instead would put near-identical neighbouring frames on both sides and
    measure memory, not generalisation.

    Raises:
        ValueError: fewer than two episodes (``source`` names the data), or a fraction outside (0, 1).
    """
    if not 0.0 < held_out_fraction < 1.0:
        raise UserError(f"--val-fraction must be in (0, 1), got {held_out_fraction}")
    unique = np.unique(episodes)
    if len(unique) < 2:
        raise UserError(
            f"--data {source}: {len(unique)} episode(s): a held-out split by episode needs at least 2 "
            "(collect more steps, or shorter episodes)"
        )
    count = min(len(unique) - 1, max(1, round(held_out_fraction * len(unique))))
    held_out = np.random.default_rng(seed).choice(unique, size=count, replace=False)
    return EpisodeSplit(tuple(sorted(int(e) for e in held_out)))

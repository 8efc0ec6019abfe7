"""Expert-dataset shards: webdataset-style tar files plus a JSON manifest.

Each sample is a group of tar members sharing one key (webdataset's convention, so
``webdataset`` and ``open_clip``'s ``--train-data 'shard-{000000..000009}.tar'`` read the shards
as they are; open_clip takes ``png`` as the image and ``txt`` as the caption)::

    000000042.png        RGB BEV, 192 x 192 x 3
    000000042.txt        CLIP caption of the expert action (METHOD §3)
    000000042.masks.npz  BEV masks, key "masks", (15, 192, 192) uint8
    000000042.json       state vector, command, speed, expert/executed action, target, ids
    000000042.chat.json  VLM conversation (prompt and JSON answer)

``manifest.json`` lists the finished shards with their sample counts, the towns the samples
were collected in (``towns``: name, network hash, samples) and the collection settings.
Shards are written under a temporary name and renamed when complete, and the
manifest is rewritten atomically after each, so an interrupted collection leaves only whole
shards behind.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from found_rl.atomic import replaced_atomically
from found_rl.errors import MissingPathError, UserError

MANIFEST_NAME = "manifest.json"
FORMAT_NAME = "found-rl-expert-webdataset"
FORMAT_VERSION = 2
"""2: a sample's ``meta`` names its ``town``, ``network`` and ``driver`` and the manifest lists
the towns; version 1 datasets read the same, their town unknown."""


@dataclass(frozen=True)
class ExpertSample:
    """One expert sample.

    Attributes:
        key: sample key inside its shard (zero-padded global index).
        bev_rgb: ``(H, W, 3)`` uint8 RGB BEV.
        masks: ``(C, H, W)`` uint8 BEV masks (ARCHITECTURE §4).
        state: the float32 state vector (:data:`found_rl.state_vector.STATE_NAMES`; ten numbers in
            datasets collected before the route points joined it).
        command: RoadOption value.
        speed_mps: ego forward speed.
        action: ``(2,)`` float32 expert ``(acc, steer)`` (the label).
        executed_action: ``(2,)`` float32 action actually applied (noisy during a perturbation).
        target_ego: next route target ``(x forward, y right)`` in metres.
        caption: CLIP caption of ``action``.
        chat: VLM conversation (``{"conversations": [...]}``).
        meta: route id, episode, step, ``is_perturbed``, and (datasets of format 2) ``town``,
            ``network`` and ``driver`` (who executed the step: ``expert``, ``advisor``,
            ``checkpoint``).
    """

    key: str
    bev_rgb: np.ndarray
    masks: np.ndarray
    state: np.ndarray
    command: int
    speed_mps: float
    action: np.ndarray
    executed_action: np.ndarray
    target_ego: tuple[float, float]
    caption: str
    chat: dict[str, Any]
    meta: dict[str, Any]

    @property
    def town(self) -> str | None:
        """The scenario file's stem the sample was collected in; None when unknown (older datasets)."""
        return self.meta.get("town")

    @property
    def network(self) -> str | None:
        """Content hash of the town's road network (or the CARLA town); None when unknown."""
        return self.meta.get("network")


@dataclass(frozen=True)
class EncodedImages:
    """A sample's BEV as PNG and its masks as ``.npz`` bytes: the costly part of writing a sample,
    done where the sample is made (a collection worker), so the one shard writer only appends."""

    png: bytes
    masks_npz: bytes


MASKS_ZLIB_LEVEL = 3
"""zlib level of the masks archive. numpy's ``savez_compressed`` (level 6) took ~10 ms a sample,
about 40 % of a collection step; level 3 takes a third of that for ~4 KB instead of ~1.5 KB (the
PNG is ~4 KB too)."""


def encode_images(bev_rgb: np.ndarray, masks: np.ndarray) -> EncodedImages:
    """PNG of the RGB BEV and an ``np.load``-readable ``.npz`` (key ``masks``) of the masks."""
    if bev_rgb.dtype != np.uint8 or bev_rgb.ndim != 3 or bev_rgb.shape[2] != 3:
        raise ValueError(f"bev_rgb: expected (H, W, 3) uint8, got {bev_rgb.shape} {bev_rgb.dtype}")
    if masks.dtype != np.uint8 or masks.ndim != 3:
        raise ValueError(f"masks: expected (C, H, W) uint8, got {masks.shape} {masks.dtype}")
    ok, png = cv2.imencode(".png", cv2.cvtColor(bev_rgb, cv2.COLOR_RGB2BGR))
    if not ok:
        raise RuntimeError("cv2 could not encode the BEV as PNG")
    buffer = io.BytesIO()
    archive = zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=MASKS_ZLIB_LEVEL)
    with archive, archive.open("masks.npy", "w") as member:
        np.lib.format.write_array(member, np.ascontiguousarray(masks), allow_pickle=False)
    return EncodedImages(png.tobytes(), buffer.getvalue())


def _add_bytes(tar: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(payload))


def _write_json_atomically(path: Path, data: Mapping[str, Any]) -> None:
    with replaced_atomically(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2))


class ShardWriter:
    """Writes samples into ``shard-NNNNNN.tar`` files of ``samples_per_shard`` samples.

    Args:
        directory: output folder; must be empty or absent (a dataset is never appended to).
        samples_per_shard: samples per tar file.
        settings: collection settings recorded in the manifest.

    Raises:
        ValueError: if ``directory`` already holds files, or ``samples_per_shard < 1``.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        samples_per_shard: int = 1000,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        if samples_per_shard < 1:
            raise ValueError(f"samples_per_shard must be >= 1, got {samples_per_shard}")
        self.directory = Path(directory)
        if self.directory.exists() and any(self.directory.iterdir()):
            raise UserError(
                f"--out {self.directory}: folder is not empty; refusing to mix datasets, pass a new folder"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        self.samples_per_shard = samples_per_shard
        self.settings = dict(settings or {})
        self.shards: list[dict[str, Any]] = []
        self.towns: dict[tuple[str, str], int] = {}
        """samples per ``(town, network)`` in the finished shards, in order of first appearance"""
        self._shard_towns: dict[tuple[str, str], int] = {}
        self.num_samples = 0
        self._tar: tarfile.TarFile | None = None
        self._tar_tmp: Path | None = None
        self._in_shard = 0

    def write(
        self,
        bev_rgb: np.ndarray,
        masks: np.ndarray,
        metadata: Mapping[str, Any],
        caption: str,
        chat: Mapping[str, Any],
    ) -> str:
        """Add one sample; returns its key. ``metadata`` must be JSON-serialisable."""
        return self.write_encoded(encode_images(bev_rgb, masks), metadata, caption, chat)

    def write_encoded(
        self,
        images: EncodedImages,
        metadata: Mapping[str, Any],
        caption: str,
        chat: Mapping[str, Any],
    ) -> str:
        """Add one sample whose images are already encoded (``encode_images``); returns its key."""
        if self._tar is None:
            self._open_shard()
        key = f"{self.num_samples:09d}"
        assert self._tar is not None
        _add_bytes(self._tar, f"{key}.png", images.png)
        _add_bytes(self._tar, f"{key}.txt", caption.encode())
        _add_bytes(self._tar, f"{key}.masks.npz", images.masks_npz)
        _add_bytes(self._tar, f"{key}.json", json.dumps(dict(metadata)).encode())
        _add_bytes(self._tar, f"{key}.chat.json", json.dumps(dict(chat)).encode())
        meta = metadata.get("meta", {})
        if "town" in meta:
            town = (str(meta["town"]), str(meta.get("network", "")))
            self._shard_towns[town] = self._shard_towns.get(town, 0) + 1
        self.num_samples += 1
        self._in_shard += 1
        if self._in_shard >= self.samples_per_shard:
            self._close_shard()
        return key

    def close(self) -> None:
        """Finish the open shard (if any) and write the final manifest."""
        self._close_shard()
        self._write_manifest()

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _shard_name(self) -> str:
        return f"shard-{len(self.shards):06d}.tar"

    def _open_shard(self) -> None:
        self._tar_tmp = self.directory / f".{self._shard_name()}.partial"
        self._tar = tarfile.open(self._tar_tmp, "w")  # noqa: SIM115 (open across add() calls; closed in _close_shard)
        self._in_shard = 0

    def _close_shard(self) -> None:
        if self._tar is None or self._tar_tmp is None:
            return
        self._tar.close()
        name = self._shard_name()
        os.replace(self._tar_tmp, self.directory / name)
        self.shards.append({"name": name, "samples": self._in_shard})
        for town, count in self._shard_towns.items():
            self.towns[town] = self.towns.get(town, 0) + count
        self._shard_towns = {}
        self._tar, self._tar_tmp, self._in_shard = None, None, 0
        self._write_manifest()

    def _write_manifest(self) -> None:
        _write_json_atomically(
            self.directory / MANIFEST_NAME,
            {
                "format": FORMAT_NAME,
                "format_version": FORMAT_VERSION,
                "num_samples": sum(shard["samples"] for shard in self.shards),
                "shards": self.shards,
                "towns": [
                    {"name": name, "network": network, "samples": samples}
                    for (name, network), samples in self.towns.items()
                ],
                "settings": self.settings,
                "members": {
                    "png": "RGB BEV (H, W, 3)",
                    "txt": "CLIP caption of the expert action (METHOD §3)",
                    "masks.npz": "BEV masks, key 'masks', (15, H, W) uint8",
                    "json": "state, command, speed_mps, action, executed_action, target_ego, meta",
                    "chat.json": "VLM conversation: prompt and JSON answer",
                },
            },
        )


def read_manifest(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The dataset's manifest; ``towns`` is an empty list for a dataset that recorded none.

    Raises:
        FileNotFoundError: if the folder has no manifest.
        ValueError: if the manifest is not a found-rl expert dataset.
    """
    path = Path(directory) / MANIFEST_NAME
    if not path.is_file():
        raise MissingPathError(
            f"{path}: no dataset manifest here (is this the folder `expert collect --out` wrote?)"
        )
    manifest = json.loads(path.read_text())
    if manifest.get("format") != FORMAT_NAME:
        raise UserError(f"{path}: format is {manifest.get('format')!r}, expected {FORMAT_NAME!r}")
    manifest.setdefault("towns", [])  # format 1 recorded no towns: unknown, not none
    return manifest


def iter_samples(directory: str | os.PathLike[str]) -> Iterator[ExpertSample]:
    """Every sample of the dataset in ``directory``, shard by shard, in write order."""
    directory = Path(directory)
    for shard in read_manifest(directory)["shards"]:
        yield from iter_shard(directory / shard["name"])


def iter_shard(path: str | os.PathLike[str]) -> Iterator[ExpertSample]:
    """Samples of one shard (members grouped by key, as webdataset does)."""
    for key, group in iter_members(path):
        yield _decode(key, group)


def iter_members(path: str | os.PathLike[str]) -> Iterator[tuple[str, dict[str, bytes]]]:
    """``(key, {suffix: bytes})`` per sample of one shard, undecoded (readers pick what they need).

    Raises:
        ValueError: the file is not a readable tar archive (the shard is named).
    """
    try:
        with tarfile.open(path, "r") as tar:
            group: dict[str, bytes] = {}
            current: str | None = None
            for member in tar:
                if not member.isfile():
                    continue
                key, _, suffix = member.name.partition(".")
                if current is not None and key != current:
                    yield current, group
                    group = {}
                current = key
                handle = tar.extractfile(member)
                group[suffix] = handle.read() if handle is not None else b""
            if current is not None:
                yield current, group
    except (tarfile.TarError, EOFError) as exc:
        raise UserError(f"shard {path}: corrupt or truncated tar archive ({exc})") from None


def _decode(key: str, group: Mapping[str, bytes]) -> ExpertSample:
    missing = {"png", "txt", "masks.npz", "json", "chat.json"} - set(group)
    if missing:
        raise UserError(f"sample {key}: shard lacks members {sorted(missing)}")
    bgr = cv2.imdecode(np.frombuffer(group["png"], np.uint8), cv2.IMREAD_COLOR)
    with np.load(io.BytesIO(group["masks.npz"])) as archive:
        masks = archive["masks"]
    metadata = json.loads(group["json"])
    return ExpertSample(
        key=key,
        bev_rgb=cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB),
        masks=masks,
        state=np.asarray(metadata["state"], dtype=np.float32),
        command=int(metadata["command"]),
        speed_mps=float(metadata["speed_mps"]),
        action=np.asarray(metadata["action"], dtype=np.float32),
        executed_action=np.asarray(metadata["executed_action"], dtype=np.float32),
        target_ego=tuple(metadata["target_ego"]),
        caption=group["txt"].decode(),
        chat=json.loads(group["chat.json"]),
        meta=dict(metadata.get("meta", {})),
    )

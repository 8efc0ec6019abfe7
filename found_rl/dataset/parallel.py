"""Expert collection in worker processes, written by one shard writer.

Each worker drives its own env (its own simulator) for its share of the steps (its segments of
the towns, ``towns.plan_segments``) and encodes the images (PNG, masks) itself, which is most of
a sample's cost after the simulation; the parent only appends the encoded samples to the
shards. The parent takes the workers' chunks in a fixed round-robin and numbers episodes in the
order it reads them, so a dataset is a function of the seed, the step count, the towns and the
number of workers: the same call writes the same samples.
"""

from __future__ import annotations

import multiprocessing
import queue
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

from fast_sampler.executors.process import default_context
from found_rl.dataset.collect import StreamConfig, stream_steps
from found_rl.dataset.shards import EncodedImages, ShardWriter, encode_images
from found_rl.dataset.towns import Segment, plan_segments

CHUNK_SAMPLES = 16
"""samples per message from a worker (one pickled message each, not one per sample)"""
QUEUE_CHUNKS = 4
"""chunks a worker may run ahead of the writer"""
POLL_S = 1.0


@dataclass(frozen=True)
class EncodedStep:
    """A sample ready for ``ShardWriter.write_encoded``; ``meta.episode`` counts within its worker."""

    images: EncodedImages
    metadata: dict[str, Any]
    caption: str
    chat: dict[str, Any]
    is_perturbed: bool


def _put(out: Any, message: Any) -> None:
    """Put, waiting while the writer is behind; exit if the writer is gone (killed, not stopped)."""
    while True:
        try:
            out.put(message, timeout=POLL_S)
            return
        except queue.Full:
            parent = multiprocessing.parent_process()
            if parent is not None and not parent.is_alive():
                raise SystemExit(1) from None


def _work(index: int, segments: list[Segment], seed: int, config: StreamConfig, out: Any) -> None:
    """A worker's life: chunks of encoded samples, then None; a traceback string if anything fails."""
    try:
        chunk: list[EncodedStep] = []
        for sample in stream_steps(config, segments, np.random.default_rng([seed, index])):
            images = encode_images(sample.bev_rgb, sample.masks)
            chunk.append(EncodedStep(images, sample.metadata, sample.caption, sample.chat, sample.is_perturbed))
            if len(chunk) == CHUNK_SAMPLES:
                _put(out, chunk)
                chunk = []
        if chunk:
            _put(out, chunk)
        _put(out, None)
    except SystemExit:
        raise
    except BaseException:  # the parent reports it, with the worker's traceback
        _put(out, traceback.format_exc())


def _next_message(inbox: Any, process: Any, index: int) -> list[EncodedStep] | None:
    """The worker's next chunk, or None when it is done; its failure or death is a RuntimeError."""
    while True:
        try:
            message = inbox.get(timeout=POLL_S)
        except queue.Empty:
            if not process.is_alive():
                raise RuntimeError(
                    f"collection worker {index} exited (code {process.exitcode}) before finishing its share"
                ) from None
            continue
        if isinstance(message, str):
            raise RuntimeError(f"collection worker {index} failed:\n{message}")
        return message


def collect_parallel(
    config: StreamConfig,
    writer: ShardWriter,
    steps: int,
    seed: int,
    workers: int,
    show_progress: bool = True,
) -> dict[str, int]:
    """Collect in ``workers`` processes for ``steps`` samples in all and write them here.

    Args:
        config: what each worker drives (picklable where processes are spawned).
        writer: the one shard writer (this process).
        steps, seed: as ``collect``; worker ``i`` draws from ``default_rng([seed, i])``.
        workers: processes, >= 1.

    Returns:
        Counts: ``samples``, ``episodes``, ``perturbed`` samples.
    """
    from tqdm import tqdm

    if workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    context = default_context()
    plan = plan_segments(steps, len(config.towns), workers)
    inboxes = [context.Queue(QUEUE_CHUNKS) for _ in plan]
    processes = [
        context.Process(
            target=_work,
            args=(index, segments, seed, config, inboxes[index]),
            name=f"found-rl-collect-{index}",
            daemon=True,
        )
        for index, segments in enumerate(plan)
    ]
    for process in processes:
        process.start()
    episode_ids: dict[tuple[int, int], int] = {}
    perturbed = 0
    active = [index for index, segments in enumerate(plan) if segments]
    finished = False
    try:
        with tqdm(total=steps, unit="sample", disable=not show_progress, desc="collect") as bar:
            while active:
                for index in list(active):
                    chunk = _next_message(inboxes[index], processes[index], index)
                    if chunk is None:
                        active.remove(index)
                        continue
                    for sample in chunk:
                        meta = sample.metadata["meta"]
                        episode = episode_ids.setdefault((index, int(meta["episode"])), len(episode_ids))
                        metadata = {**sample.metadata, "meta": {**meta, "episode": episode}}
                        writer.write_encoded(sample.images, metadata, sample.caption, sample.chat)
                        perturbed += int(sample.is_perturbed)
                    bar.update(len(chunk))
        finished = True
    finally:
        for process in processes:
            process.join(timeout=10.0 if finished else 0.0)  # a finished worker is only flushing its queue
            if process.is_alive():
                process.terminate()
                process.join(timeout=10.0)
    return {"samples": steps, "episodes": len(episode_ids), "perturbed": perturbed}

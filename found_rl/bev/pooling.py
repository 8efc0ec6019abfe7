"""Max-pooling of the channel stack (Roach's ``downsample_maxpool``), without Python loops."""

from __future__ import annotations

import cv2
import numpy as np


class MaxPool:
    """Non-overlapping ``pool x pool`` max-pooling of ``(C, H, W)`` uint8 stacks.

    Holds scratch buffers so the hot 2 x 2 case allocates only its output: rows are pooled by
    comparing the two contiguous halves of each row pair, columns by splitting the pixel pairs
    into two planes (read as a 2-channel image) and comparing those; all three steps are
    vectorised OpenCV calls.
    """

    def __init__(self, shape_chw: tuple[int, int, int], pool: int) -> None:
        channels, height, width = shape_chw
        if pool < 1 or height % pool or width % pool:
            raise ValueError(f"MaxPool: pool={pool} must be >= 1 and divide the image size {height}x{width}")
        self.pool = pool
        self.shape_chw = shape_chw
        self.out_shape = (channels, height // pool, width // pool)
        if pool == 2:
            rows = channels * height // 2
            self._row_max = np.empty((rows, width), np.uint8)
            self._columns = [np.empty((rows, width // 2), np.uint8) for _ in range(2)]

    def __call__(self, masks: np.ndarray) -> np.ndarray:
        """Pool ``masks`` (C-contiguous ``shape_chw`` uint8) into a new C-contiguous array."""
        if masks.shape != self.shape_chw or masks.dtype != np.uint8 or not masks.flags.c_contiguous:
            raise ValueError(
                f"MaxPool: expected a C-contiguous uint8 array of shape {self.shape_chw}, "
                f"got {masks.dtype} {masks.shape}"
            )
        if self.pool == 1:
            return masks.copy()
        if self.pool != 2:
            channels, height, width = self.shape_chw
            p = self.pool
            return np.ascontiguousarray(masks.reshape(channels, height // p, p, width // p, p).max(axis=(2, 4)))
        width = self.shape_chw[2]
        row_pairs = masks.reshape(-1, 2 * width)
        cv2.max(row_pairs[:, :width], row_pairs[:, width:], dst=self._row_max)
        even, odd = cv2.split(self._row_max.reshape(len(self._row_max), width // 2, 2), self._columns)
        out = np.empty(self.out_shape, np.uint8)
        cv2.max(even, odd, dst=out.reshape(even.shape))
        return out

"""Per-route videos of the RGB BEV with speed, command and action written on each frame."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from found_rl.actions import RoadOption
from found_rl.atomic import replaced_atomically
from found_rl.errors import UserError

VIDEO_SUFFIXES = (".gif", ".mp4")
FPS = 10  # one frame per 0.1 s env step


def annotate_frame(
    bev_rgb: np.ndarray, speed_mps: float, command: int, action: np.ndarray, scale: int = 2
) -> np.ndarray:
    """``(H, W, 3)`` uint8 BEV upscaled by ``scale`` with three lines of text overlaid."""
    frame = cv2.resize(bev_rgb, None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)
    try:
        command_name = RoadOption(int(command)).name
    except ValueError:
        command_name = str(command)
    lines = (
        f"speed {speed_mps:5.2f} m/s",
        f"cmd {command_name}",
        f"acc {float(action[0]):+.2f} steer {float(action[1]):+.2f}",
    )
    for row, text in enumerate(lines):
        origin = (6, 18 + 18 * row)
        cv2.putText(frame, text, origin, cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 0, 0), 3, cv2.LINE_AA)
        cv2.putText(frame, text, origin, cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 0), 1, cv2.LINE_AA)
    return frame


MP4_NEEDS = "MP4 videos need the imageio-ffmpeg package (python -m pip install imageio-ffmpeg)"


def mp4_supported() -> bool:
    """Whether imageio can write MP4 here (its ffmpeg plug-in is installed)."""
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        return False
    return True


class VideoRecorder:
    """Collects annotated frames and writes a GIF or MP4 (by suffix) when closed.

    GIF frames are reduced to a 256-colour palette as they arrive (what the GIF writer would do
    at the end): the colour reduction, most of a GIF's encoding time, then runs during the
    drive, whose progress bar shows it, and each frame keeps a third of the memory. The
    palette is PIL's fast octree (about 2.5 ms a 384 px frame, a fifth of the median cut's):
    the BEV's flat colours come through exact, only the text's anti-aliased edges may shift.

    Raises:
        ValueError: on an unsupported suffix, or ``.mp4`` without the imageio-ffmpeg plug-in.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if self.path.suffix not in VIDEO_SUFFIXES:
            raise UserError(f"video {self.path}: suffix must be one of {VIDEO_SUFFIXES}")
        if self.path.suffix == ".mp4" and not mp4_supported():
            raise UserError(f"video {self.path}: {MP4_NEEDS}; or write a .gif")
        self.frames: list[np.ndarray | Image.Image] = []

    @property
    def is_gif(self) -> bool:
        return self.path.suffix == ".gif"

    def add(self, bev_rgb: np.ndarray, speed_mps: float, command: int, action: np.ndarray) -> None:
        frame = annotate_frame(bev_rgb, speed_mps, command, action)
        if self.is_gif:
            self.frames.append(Image.fromarray(frame).quantize(256, method=Image.Quantize.FASTOCTREE))
        else:
            self.frames.append(frame)

    def close(self, show_progress: bool = False) -> None:
        """Write the video (atomically) and drop the frames; a bar shows the write when asked."""
        from tqdm import tqdm

        if not self.frames:
            return
        with tqdm(total=1, unit="video", desc=f"write {self.path.name}", disable=not show_progress) as bar:
            with replaced_atomically(self.path) as tmp:
                if self.is_gif:
                    first, *rest = self.frames
                    first.save(tmp, format="GIF", save_all=True, append_images=rest, duration=1000 / FPS, loop=0)
                else:
                    import imageio.v2 as imageio

                    imageio.mimsave(tmp, self.frames, fps=FPS, macro_block_size=1)
            bar.update(1)
        self.frames = []

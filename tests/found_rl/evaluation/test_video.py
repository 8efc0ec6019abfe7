"""Videos: a bad path is refused by name, and a failed write leaves nothing half-written."""

import numpy as np
import pytest

from found_rl.evaluation.video import VideoRecorder, mp4_supported


def test_unsupported_suffix_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"video .*route\.avi: suffix must be one of"):
        VideoRecorder(tmp_path / "route.avi")


@pytest.mark.skipif(mp4_supported(), reason="imageio-ffmpeg is installed")
def test_mp4_without_ffmpeg_names_the_file_and_the_fix(tmp_path):
    with pytest.raises(ValueError, match=r"video .*route\.mp4: MP4 videos need the imageio-ffmpeg package"):
        VideoRecorder(tmp_path / "route.mp4")


def test_a_failed_write_leaves_no_partial_file(tmp_path):
    (tmp_path / "route.gif").mkdir()  # the rename onto it fails
    video = VideoRecorder(tmp_path / "route.gif")
    video.add(np.zeros((8, 8, 3), np.uint8), 1.0, 4, np.zeros(2, np.float32))
    with pytest.raises(OSError):
        video.close()
    assert [p.name for p in tmp_path.iterdir()] == ["route.gif"]


def test_a_gif_keeps_the_bevs_flat_colours_exact(tmp_path):
    from PIL import Image

    bev = np.zeros((96, 96, 3), np.uint8)
    colours = [(0, 0, 0), (128, 128, 128), (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)]
    for i, colour in enumerate(colours):
        bev[60 + 6 * i : 66 + 6 * i] = colour  # below the text
    video = VideoRecorder(tmp_path / "route.gif")
    video.add(bev, 1.0, 4, np.zeros(2, np.float32))
    video.close()
    with Image.open(tmp_path / "route.gif") as gif:
        frame = np.asarray(gif.convert("RGB"))
    for i, colour in enumerate(colours):  # upscaled by 2
        assert (frame[2 * (60 + 6 * i) : 2 * (66 + 6 * i)] == colour).all(), colour

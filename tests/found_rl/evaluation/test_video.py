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

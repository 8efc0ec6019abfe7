"""found_rl.atomic: a file is replaced only by complete content, and no temporary survives."""

import errno
import os

import pytest

from found_rl.atomic import replaced_atomically
from found_rl.errors import DiskFullError, OutsideFailure


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    out = tmp_path / "routes.xml"
    out.write_text("old")
    with pytest.raises(OSError, match="disk full"), replaced_atomically(out) as tmp:
        tmp.write_text("<routes><rou")
        raise OSError("disk full")
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["routes.xml"]


def test_a_full_disk_names_the_file_and_keeps_the_old_one(tmp_path):
    out = tmp_path / "replay_0000030000.npz"
    out.write_text("old")
    expected = r"no space left on the device for .*replay_0000030000\.npz"
    with pytest.raises(DiskFullError, match=expected) as caught, replaced_atomically(out) as tmp:
        tmp.write_text("partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert isinstance(caught.value, OutsideFailure) and caught.value.errno == errno.ENOSPC
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["replay_0000030000.npz"]


def test_an_interrupted_write_leaves_nothing_behind(tmp_path):
    out = tmp_path / "results.json"
    with pytest.raises(KeyboardInterrupt), replaced_atomically(out) as tmp:
        tmp.write_text("{")
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_a_finished_write_replaces_the_file_and_creates_its_folder(tmp_path):
    out = tmp_path / "new" / "routes.xml"
    with replaced_atomically(out) as tmp:
        tmp.write_text("new")
    assert out.read_text() == "new"
    assert sorted(p.name for p in out.parent.iterdir()) == ["routes.xml"]


def test_the_temporary_keeps_the_suffix_and_is_hidden(tmp_path):
    # Writers such as imageio choose the format by the suffix.
    with replaced_atomically(tmp_path / "video.gif") as tmp:
        assert tmp.suffix == ".gif" and tmp.name.startswith(".") and tmp.parent == tmp_path
        tmp.write_bytes(b"GIF89a")
    assert (tmp_path / "video.gif").read_bytes() == b"GIF89a"


def test_two_writers_get_different_temporaries(tmp_path):
    with replaced_atomically(tmp_path / "a.json") as first, replaced_atomically(tmp_path / "a.json") as second:
        assert first != second
        first.write_text("1")
        second.write_text("2")
    assert (tmp_path / "a.json").read_text() == "1"  # the outer block finishes last

"""Reading a user's torch.save file: a damaged file is named as the user's to fix, any other failure stays loud."""

from __future__ import annotations

import argparse
import os

import pytest
import torch

from vlm_server.errors import MissingPathError
from vlm_server.torch_files import UnreadableTorchFileError, load_torch_file


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "weights.pt"
    torch.save({"w": torch.arange(64.0)}, path)
    return path


def test_a_complete_file_is_read(saved):
    assert torch.equal(load_torch_file(saved, "--checkpoint")["w"], torch.arange(64.0))


@pytest.mark.parametrize("kept", [0, 10, 200, -100])
def test_a_truncated_file_names_the_flag_and_the_path(saved, kept):
    saved.write_bytes(saved.read_bytes()[:kept])
    with pytest.raises(UnreadableTorchFileError, match=rf"--checkpoint {saved}: cannot be read as a torch file"):
        load_torch_file(saved, "--checkpoint")


@pytest.mark.parametrize("mmap", [False, True])
def test_a_file_of_another_format_is_the_users(tmp_path, mmap):
    path = tmp_path / "notes.pt"
    path.write_bytes(b"plain text, not a torch file\n" * 4)
    with pytest.raises(UnreadableTorchFileError, match=r"notes\.pt"):
        load_torch_file(path, "--pretrained", mmap=mmap)


def test_a_weights_only_load_of_other_objects_says_so(tmp_path):
    path = tmp_path / "pickled.pt"
    torch.save({"obj": argparse.Namespace(a=1)}, path)  # a class instance: a weights-only load refuses it
    with pytest.raises(UnreadableTorchFileError, match="holds objects other than tensors") as raised:
        load_torch_file(path, "--checkpoint")
    assert "argparse.Namespace" in str(raised.value) and "\n" not in str(raised.value)


def test_a_missing_file_and_a_folder_are_the_users(tmp_path):
    with pytest.raises(MissingPathError, match=r"--checkpoint .*missing\.pt does not exist") as raised:
        load_torch_file(tmp_path / "missing.pt", "--checkpoint")
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, FileNotFoundError)
    with pytest.raises(ValueError, match="is not a file"):
        load_torch_file(tmp_path, "--checkpoint")


@pytest.mark.parametrize(
    "failure",
    [torch.OutOfMemoryError("out of memory"), RuntimeError("a bug in a storage hook"), KeyError("state")],
)
def test_any_other_failure_passes_unchanged_with_its_traceback(saved, monkeypatch, failure):
    def load(*args, **kwargs):
        raise failure

    monkeypatch.setattr(torch, "load", load)
    with pytest.raises(type(failure)) as raised:
        load_torch_file(saved, "--checkpoint")
    assert raised.value is failure and not isinstance(raised.value, UnreadableTorchFileError)
    assert raised.traceback[-1].name == "load"  # raised where it happened, not re-raised by the reader


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="POSIX permissions; root reads any file")
def test_a_file_the_user_cannot_read_is_named(saved):
    saved.chmod(0)
    with pytest.raises(ValueError, match=r"weights\.pt: cannot be read \(Permission denied\)"):
        load_torch_file(saved, "--checkpoint")


def test_a_file_cut_anywhere_is_named_as_the_files(saved):
    data = saved.read_bytes()
    for cut in range(0, len(data), 37):
        saved.write_bytes(data[:cut])
        with pytest.raises(UnreadableTorchFileError, match="truncated, corrupt or of another format"):
            load_torch_file(saved, "--checkpoint")


@pytest.mark.parametrize("position", [0, 1, -22, -20])
def test_a_damaged_archive_is_named_as_the_files(saved, position):
    corrupt = bytearray(saved.read_bytes())
    corrupt[position] ^= 0xFF  # the zip signatures: first local header, end of the central directory
    saved.write_bytes(bytes(corrupt))
    with pytest.raises(UnreadableTorchFileError, match="truncated, corrupt or of another format"):
        load_torch_file(saved, "--checkpoint")

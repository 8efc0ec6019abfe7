"""Reading a ``torch.save`` file the user names, telling a damaged file from a failure of ours.

``torch.load`` raises several types for a file that is truncated, corrupt or of another format
(``pickle.UnpicklingError``, ``EOFError``, ``UnicodeDecodeError``, ``OSError`` EINVAL and
``RuntimeError`` from its zip reader; found by cutting and flipping bytes of a saved file), and
the same ``RuntimeError`` and ``OSError`` for unrelated failures. Only the first kind is the
user's to fix; anything else keeps its type and traceback. (A flipped byte inside the pickled
data can make the unpickler raise nearly any type; those are not guessed at and stay loud.)
"""

from __future__ import annotations

import errno
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from vlm_server.errors import require_file

DAMAGED_FILE_MARKERS = (
    "PytorchStreamReader failed",  # the zip reader: truncated, no central directory, missing records
    'hasRecord("version")',  # a zip without torch's records
    "inline_container.cc",  # the zip reader's own checks of the archive's layout
    "Invalid magic number",  # the legacy format's header
    "Invalid protocol version",
)
"""Texts of the ``RuntimeError`` ``torch.load`` raises for a file that is not a complete torch.save file."""

MMAP_NEEDS_ZIP = "mmap can only be used"
"""``torch.load(mmap=True)`` on a file in the legacy (pre-1.6, non-zip) format."""

WEIGHTS_ONLY_REFUSED = "Weights only load failed"
"""The ``pickle.UnpicklingError`` of a weights-only load: other objects than tensors and plain data
("Unsupported global: ..."), or pickled data it cannot parse (a corrupt file)."""
WEIGHTS_UNPICKLER_ERROR = "WeightsUnpickler error:"
"""Where torch's message gives the reason, after paragraphs of advice."""


class UnreadableTorchFileError(ValueError):
    """A file the user named is not a readable ``torch.save`` file (truncated, corrupt or foreign)."""


def is_damaged_file_error(exc: BaseException) -> bool:
    """Whether ``exc``, raised by ``torch.load``, says the file itself is damaged or of another format."""
    if isinstance(exc, (pickle.UnpicklingError, EOFError, zipfile.BadZipFile, UnicodeDecodeError)):
        return True  # UnicodeDecodeError: a corrupt string in the pickled data
    if isinstance(exc, OSError) and exc.errno == errno.EINVAL:
        return True  # the zip reader seeking past the end of a truncated file
    if isinstance(exc, RuntimeError):
        text = str(exc)
        return any(marker in text for marker in DAMAGED_FILE_MARKERS) or MMAP_NEEDS_ZIP in text
    return False


def load_torch_file(path: str | Path, what: str, *, weights_only: bool = True, mmap: bool = False) -> Any:
    """The data of a ``torch.save`` file, loaded on the CPU.

    Args:
        path: the file.
        what: how the user named it, for messages: a flag (``--checkpoint``) or a kind ("CLIP checkpoint").
        weights_only: refuse objects other than tensors and plain data (no code runs on load).
        mmap: map the tensors' storage instead of reading it (zip-format files only).

    Raises:
        MissingPathError: no such file.
        ValueError: a folder, or a file the user cannot read (permissions).
        UnreadableTorchFileError: truncated, corrupt or not a torch.save file, or (weights-only)
            one holding other objects; names ``what``, the path and torch's reason.
        Any other exception of ``torch.load`` (out of memory, a bug) passes unchanged.
    """
    path = require_file(path, what)
    try:
        return torch.load(path, map_location="cpu", weights_only=weights_only, mmap=mmap)
    except PermissionError as exc:
        raise ValueError(f"{what} {path}: cannot be read ({exc.strerror})") from None
    except Exception as exc:
        if not is_damaged_file_error(exc):
            raise
        reason = _reason(exc)
        if reason.startswith("Unsupported global"):
            raise UnreadableTorchFileError(
                f"{what} {path}: holds objects other than tensors and plain data, so it is not a weights file "
                f"of this kind ({reason})"
            ) from None
        raise UnreadableTorchFileError(
            f"{what} {path}: cannot be read as a torch file; it is truncated, corrupt or of another format ({reason})"
        ) from None


def _reason(exc: BaseException) -> str:
    """torch's reason in one line: for a weights-only refusal, the unpickler's own line, not the advice around it."""
    text = str(exc)
    if WEIGHTS_ONLY_REFUSED in text and WEIGHTS_UNPICKLER_ERROR in text:
        after = text.split(WEIGHTS_UNPICKLER_ERROR, 1)[1].strip().splitlines()
        if after:
            return after[0].strip()
    return first_line(exc)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text, or its type's name when it has none."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

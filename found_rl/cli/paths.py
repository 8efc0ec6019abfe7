"""Checks of output paths a user names on the command line.

The checks run before any simulator or long job starts, so a mistyped ``--out`` costs
nothing (the writes themselves go through :mod:`found_rl.atomic`).
"""

from __future__ import annotations

import os
from pathlib import Path

from found_rl.errors import UserError


def check_output_file(path: Path, flag: str) -> None:
    """Refuse a file path that is a folder or lies under a file.

    Raises:
        UserError: naming ``flag`` and the path.
    """
    if path.is_dir():
        raise UserError(f"{flag} {path}: is a folder; pass a file path")
    _check_parents(path, flag)


def check_output_dir(path: Path, flag: str) -> None:
    """Refuse a folder path that is a file or lies under a file.

    Raises:
        UserError: naming ``flag`` and the path.
    """
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path}: is a file, not a folder; pass a folder path")
    _check_parents(path, flag)


def _check_parents(path: Path, flag: str) -> None:
    """Refuse a path under a file, or one that cannot be created or written for lack of permission.

    Checked here, where the flag is read, so that a ``PermissionError`` later, from writing, stays
    what it is: a bug (found-rl writing where it should not), never the user's by default.
    """
    if path.exists():
        if not os.access(path, os.W_OK):
            raise UserError(f"{flag} {path}: not writable by you (permission denied)")
        return
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{flag} {path}: {parent} is a file, not a folder")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise UserError(f"{flag} {path}: cannot create it in {parent} (permission denied)")
            return

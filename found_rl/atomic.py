"""Replace a file only once its new content is complete and on disk.

Checkpoints, results files, route files, videos, dataset indexes and map caches are all
written through :func:`replaced_atomically`, so a crash, a full disk or Ctrl-C mid-write
leaves the old file (or none) and no temporary file behind.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from found_rl.errors import DiskFullError, is_disk_full


@contextmanager
def replaced_atomically(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block succeeds, rename it over ``path``.

    The temporary name keeps ``path``'s suffix (writers such as imageio choose the format by
    it) and starts with a dot. The content is flushed to disk before the rename, so the rename
    never exposes a file whose data is still in flight. If the block raises, the temporary
    file is removed and ``path`` is untouched; a full disk is raised as
    :class:`~found_rl.errors.DiskFullError`, naming ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}-{secrets.token_hex(4)}.tmp{path.suffix}")
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if is_disk_full(exc) and not isinstance(exc, DiskFullError):
            raise DiskFullError(path, exc) from exc  # type: ignore[arg-type]
        raise


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

"""The exception types for mistakes of vlm_server's user that the built-in types cannot say.

vlm_server reports what its user got wrong (a flag, a config field, a file) as ``ValueError``,
whose message names the flag, field or file; its own command and found-rl print such an error
as one line. A missing file is such a mistake, but a plain ``FileNotFoundError`` can just as well
be a bug (a file the server wrote itself), so the user's kind has its own type.
"""

from __future__ import annotations

from pathlib import Path


class MissingPathError(ValueError, FileNotFoundError):
    """A file or folder the user named does not exist.

    A ``ValueError`` like every other mistake of the user's, and a ``FileNotFoundError`` for code
    that catches that.
    """


def require_file(path: str | Path, what: str) -> Path:
    """``path`` once it names an existing file: a missing path or a folder is the user's mistake.

    Raises:
        MissingPathError: no such path (the message names ``what`` and the path).
        ValueError: the path is a folder.
    """
    path = Path(path)
    if not path.exists():
        raise MissingPathError(f"{what} {path} does not exist")
    if not path.is_file():
        raise ValueError(f"{what} {path}: is not a file")
    return path

"""The exception types for mistakes of vlm_server's user: a flag, a config field, a backend option, a file.

vlm_server reports what its user got wrong as :class:`UsageError`, whose message names the flag,
field, option or file; its own command and found-rl print such an error as one line (exit 2).
Any other exception, a plain ``ValueError`` or ``FileNotFoundError`` included, can just as well
be a bug of the server's (a file it wrote itself, a check of its own), so it keeps its traceback.
"""

from __future__ import annotations

from pathlib import Path


class UsageError(ValueError):
    """A mistake of the server's user; the message names the flag, config field, option or file.

    Backend plug-ins raise it for a constructor option they refuse (found-rl's ``UserError`` is
    one). A ``ValueError``, so code catching ``ValueError`` still works.
    """


class MissingPathError(UsageError, FileNotFoundError):
    """A file or folder the user named does not exist.

    A :class:`UsageError` like every other mistake of the user's, and a ``FileNotFoundError`` for
    code that catches that.
    """


def require_file(path: str | Path, what: str) -> Path:
    """``path`` once it names an existing file: a missing path or a folder is the user's mistake.

    Raises:
        MissingPathError: no such path (the message names ``what`` and the path).
        UsageError: the path is a folder.
    """
    path = Path(path)
    if not path.exists():
        raise MissingPathError(f"{what} {path} does not exist")
    if not path.is_file():
        raise UsageError(f"{what} {path}: is not a file")
    return path

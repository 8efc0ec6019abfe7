"""The one exception type for a user's mistake: a bad file, flag, field or request.

``found-rl`` prints a :class:`UserError` as one line naming what to fix and exits 2; any other
exception is a bug of found-rl and keeps its traceback, with a line asking to report it. Raise
it where input enters (reading files, parsing flags and config fields, answering HTTP), not
for internal checks. It is a ``ValueError``, so code catching ``ValueError`` still works.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class UserError(ValueError):
    """A mistake in what the user gave; the message names the file, flag or field to fix."""


class OutsideFailure(RuntimeError):
    """Something outside found-rl stopped the job (an advisor server that stopped answering).

    Neither the user's mistake nor a bug: ``found-rl`` prints it as one line naming what failed
    and where the job stood, and exits 3.
    """


@contextlib.contextmanager
def as_user_error() -> Iterator[None]:
    """Re-raise a ``ValueError`` of the block as :class:`UserError`.

    For calls into vlm_server and fast_sampler that check what the user gave (a checkpoint, a
    model, a server config): those packages never import found-rl, so they report such
    mistakes as plain ``ValueError``.
    """
    try:
        yield
    except UserError:
        raise
    except ValueError as exc:
        raise UserError(str(exc)) from None

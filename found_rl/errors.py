"""The exception types that say whose fault a failure is: the user's, the world's, or a child run's.

``found-rl`` prints each as one line and exits with its code; any other exception is a bug of
found-rl and keeps its traceback, with a line asking to report it (exit 1). Raise them where
input enters (reading files, parsing flags and config fields, answering HTTP), not for internal
checks, and never catch a whole class of built-in errors (every ``FileNotFoundError``) to turn
it into one of them: a file found-rl itself failed to write is a bug.

Exit codes of ``found-rl``:

====  ==============================================================================
code  meaning
====  ==============================================================================
0     done
1     a bug in found-rl (the traceback is printed)
2     the user's mistake (:class:`UserError` and its subclasses; argparse's own too)
3     something outside found-rl stopped the job (:class:`OutsideFailure`)
4     child runs found-rl started failed (:class:`ChildRunsFailed`): their logs say why
130   interrupted (Ctrl-C), found-rl's own run or its child runs' (:class:`ChildRunsInterrupted`)
====  ==============================================================================
"""

from __future__ import annotations

import contextlib
import errno
import signal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from vlm_server.errors import UsageError

EXIT_BUG = 1
EXIT_USAGE = 2
EXIT_OUTSIDE = 3
EXIT_CHILD_FAILED = 4
EXIT_INTERRUPTED = 130


class UserError(UsageError):
    """A mistake in what the user gave; the message names the file, flag or field to fix.

    It is a ``ValueError``, so code catching ``ValueError`` still works, and vlm_server's
    :class:`~vlm_server.errors.UsageError`, so a found-rl plug-in of the server
    (``found_rl.advisors:ExpertAdvisor``) refusing an option is the user's mistake there too.
    """


class MissingPathError(UserError, FileNotFoundError):
    """A file or folder the user named does not exist (also a ``FileNotFoundError``)."""


class ExistingPathError(UserError, FileExistsError):
    """A path the user named for new output already exists (also a ``FileExistsError``)."""


class NotAFolderError(UserError, NotADirectoryError):
    """A path the user gave as a folder is a file (also a ``NotADirectoryError``)."""


class NotAFileError(UserError, IsADirectoryError):
    """A path the user gave as a file is a folder (also an ``IsADirectoryError``)."""


class OutsideFailure(RuntimeError):
    """Something outside found-rl stopped the job (an advisor server that stopped answering).

    Neither the user's mistake nor a bug: ``found-rl`` prints it as one line naming what failed
    and where the job stood, and exits 3.
    """


DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
"""``OSError`` numbers that mean the disk (or the user's quota) is full: the machine's state, not a bug."""
DISK_FULL_ADVICE = (
    "free space and run again (`found-rl train --resume RUN_DIR` continues a run from its last checkpoint)"
)
"""What to do about a full disk, in every message that reports one."""


class DiskFullError(OutsideFailure, OSError):
    """A write failed because the disk is full (also an ``OSError`` with the original errno)."""

    def __init__(self, path: str | Path, cause: OSError):
        super().__init__(
            f"no space left on the device for {path} ({cause.strerror}); "
            f"the file was left as it was: {DISK_FULL_ADVICE}"
        )
        self.errno = cause.errno


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that failed on a full disk or quota."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


@dataclass(frozen=True)
class FailedChildRun:
    """One child process found-rl started that did not do its job.

    Attributes:
        name: what the run is (``guided-s1``).
        folder: its run folder.
        exit_code: the child's exit code (negative: killed by that signal); 0 when it exited
            cleanly without finishing (``reason`` says so).
        log: the file its output went to.
        reason: what went wrong, when the exit code alone does not say it.
    """

    name: str
    folder: Path
    exit_code: int
    log: Path
    reason: str = ""

    @property
    def was_interrupted(self) -> bool:
        """Whether Ctrl-C stopped it: ``found-rl`` exits 130 then (a child without Python's
        handler dies of SIGINT)."""
        return self.exit_code in (EXIT_INTERRUPTED, -signal.SIGINT)

    def describe(self) -> str:
        """One line: the run, its folder, how it ended and where its log is."""
        if self.was_interrupted:
            ended = "interrupted (Ctrl-C)"
        elif self.exit_code < 0:
            ended = f"killed by signal {-self.exit_code}"
        elif self.exit_code == 0:
            ended = "exited 0"
        else:
            ended = f"exited {self.exit_code}"
        reason = f" ({self.reason})" if self.reason else ""
        return f"{self.name}: {ended}{reason}; run folder {self.folder}, log {self.log}"


class ChildRunsFailed(RuntimeError):
    """Child runs found-rl started (``bench guidance``'s ``found-rl train`` runs) failed.

    Not a bug of the parent: each child's own log holds its error (a user's mistake or a
    traceback). ``found-rl`` prints one line per failed run and exits 4.
    """

    def __init__(self, what: str, failed: Sequence[FailedChildRun]) -> None:
        self.failed = tuple(failed)
        super().__init__(_runs_message(f"{what}: {len(self.failed)} run(s) failed or did not finish:", self.failed))


class ChildRunsInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped child runs found-rl started: nobody's mistake and no failure.

    A ``KeyboardInterrupt``, so ``found-rl`` exits 130 as for its own Ctrl-C; it names the runs
    that did not finish (any that failed beside them too), which the same command resumes.
    """

    def __init__(self, what: str, unfinished: Sequence[FailedChildRun]) -> None:
        self.unfinished = tuple(unfinished)
        headline = f"{what}: interrupted; {len(self.unfinished)} run(s) did not finish (the same command resumes them):"
        super().__init__(_runs_message(headline, self.unfinished))


def _runs_message(headline: str, runs: Sequence[FailedChildRun]) -> str:
    return "\n".join([headline, *(f"  {run.describe()}" for run in runs)])


@contextlib.contextmanager
def as_user_error(kind: type[ValueError] = ValueError) -> Iterator[None]:
    """Re-raise a ``kind`` (default ``ValueError``) of the block as :class:`UserError`.

    For calls into vlm_server and fast_sampler that check what the user gave (a checkpoint, a
    model, a server config): those packages never import found-rl, so they report such
    mistakes as ``ValueError`` (a missing path as a ``ValueError`` that is also a
    ``FileNotFoundError``, which becomes :class:`MissingPathError`). Where vlm_server says
    which are the user's (:class:`~vlm_server.errors.UsageError`, e.g. ``found-rl serve``), pass
    that as ``kind``, so its own ``ValueError`` stays a bug. Any other exception of the block, a
    plain ``FileNotFoundError`` included, passes unchanged.
    """
    try:
        yield
    except UserError:
        raise
    except kind as exc:
        kind = MissingPathError if isinstance(exc, FileNotFoundError) else UserError
        raise kind(str(exc)) from None

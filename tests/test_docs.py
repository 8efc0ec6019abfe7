"""Every ``python`` and ``bash`` block of the README and the docs runs here, as written.

A documentation example that stops working is a failing test, not silent rot. Blocks are
collected from ``README.md``, ``scenarios/README.md`` and ``docs/*.md`` by their fence's
language, so a new block is tested without anyone registering it. Other languages (yaml,
text, output listings) are not run.

Each block runs in a fresh folder that holds a copy of ``scenarios/`` (blocks may write there)
and a link to ``tests/`` (for the short variants' small worlds): python blocks as a script,
bash blocks with ``bash -euo pipefail``, where ``found-rl`` and ``python`` are this checkout's
(``python -m found_rl``). A block passes when it exits 0 without a traceback or a warning on
stderr (with Python's default filters, as a user sees them: a leaked shared-memory block or a
gymnasium cast warning fails it).

A block changes how it is tested only through an HTML comment on the line(s) right above its
fence, visible in the Markdown source:

    <!-- docs-test: skip REASON -->          not run (e.g. an install command); REASON is required
    <!-- docs-test: parse-only REASON -->    each ``found-rl`` command is parsed by the real CLI
                                             parser, each ``found-rl train FILE`` also resolves
                                             its run config (FILE, its scenarios, --set), and
                                             each ``python -m MODULE`` must import; nothing runs
                                             (records of long benchmark runs, long training)
    <!-- docs-test: replace "OLD" "NEW" -->  run the documented short variant: every OLD becomes
                                             NEW (OLD must occur); ``{free_port}`` in NEW is a
                                             free local port

Any other ``docs-test:`` comment is an error, as is an OLD that no longer occurs. bash blocks
of ``docs/benchmarks.md`` are parse-only unless marked otherwise: they record benchmark runs
of minutes to hours.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = (
    "README.md",
    "scenarios/README.md",
    *sorted(str(page.relative_to(ROOT)) for page in (ROOT / "docs").glob("*.md")),
)
RUN_LANGUAGES = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
PARSE_ONLY_BY_DEFAULT = {"docs/benchmarks.md": "records of benchmark runs that take minutes to hours"}
BLOCK_TIMEOUT_S = 240

_FENCE = re.compile(r"^(?P<fence>```+|~~~+)\s*(?P<info>[^`\s]*)")
_MARKER = re.compile(r"^<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
_REPLACE = re.compile(r'^replace\s+"(?P<old>(?:[^"\\]|\\.)+)"\s+"(?P<new>(?:[^"\\]|\\.)*)"$')


@dataclass
class CodeBlock:
    """One fenced block: where it is, its language, its text and how it is to be tested."""

    path: str
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    mode: str = "run"  # run | skip | parse-only
    reason: str = ""
    replacements: list[tuple[str, str]] = field(default_factory=list)

    @property
    def test_id(self) -> str:
        return f"{self.path}:{self.line}:{self.language}"


class MarkerError(ValueError):
    """A ``docs-test:`` comment that cannot be honoured (names the file and line)."""


def parse_blocks(path: str, markdown: str) -> list[CodeBlock]:
    """The fenced blocks of ``markdown`` with their ``docs-test`` markers applied.

    Raises:
        MarkerError: for an unknown marker, a skip or parse-only without a reason, a
            malformed replace, or a marker not followed by a fence.
    """
    blocks: list[CodeBlock] = []
    lines = markdown.splitlines()
    pending: list[tuple[int, str]] = []  # markers waiting for their fence
    index = 0
    while index < len(lines):
        line = lines[index]
        marker = _MARKER.match(line.strip())
        if marker:
            pending.append((index + 1, marker.group("body")))
            index += 1
            continue
        fence = _FENCE.match(line)
        if not fence:
            if pending and line.strip():
                raise MarkerError(f"{path}:{pending[0][0]}: a docs-test marker must be right above a code fence")
            index += 1
            continue
        closing = fence.group("fence")
        end = index + 1
        while end < len(lines) and not lines[end].startswith(closing):
            end += 1
        block = CodeBlock(path, index + 1, fence.group("info").lower(), "\n".join(lines[index + 1 : end]) + "\n")
        _apply_markers(block, pending)
        if block.language in RUN_LANGUAGES:
            blocks.append(block)
        pending = []
        index = end + 1
    if pending:
        raise MarkerError(f"{path}:{pending[0][0]}: a docs-test marker must be right above a code fence")
    return blocks


def _apply_markers(block: CodeBlock, markers: list[tuple[int, str]]) -> None:
    if not markers and block.language in ("bash", "sh", "shell") and block.path in PARSE_ONLY_BY_DEFAULT:
        block.mode, block.reason = "parse-only", PARSE_ONLY_BY_DEFAULT[block.path]
    for line, body in markers:
        where = f"{block.path}:{line}"
        verb, _, rest = body.partition(" ")
        if verb in ("skip", "parse-only"):
            if not rest.strip():
                raise MarkerError(f"{where}: 'docs-test: {verb}' needs a reason")
            block.mode, block.reason = verb, rest.strip()
        elif verb == "replace":
            match = _REPLACE.match(body)
            if not match:
                raise MarkerError(f'{where}: expected docs-test: replace "OLD" "NEW", got {body!r}')
            old, new = (match.group(name).replace('\\"', '"') for name in ("old", "new"))
            if old not in block.text:
                raise MarkerError(f"{where}: replace {old!r}: the block below no longer contains it")
            block.replacements.append((old, new))
        else:
            raise MarkerError(f"{where}: unknown docs-test marker {verb!r}; use skip, parse-only or replace")


def collect_blocks() -> list[CodeBlock]:
    return [block for path in DOC_FILES for block in parse_blocks(path, (ROOT / path).read_text())]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def runnable_text(block: CodeBlock) -> str:
    text = block.text
    for old, new in block.replacements:
        text = text.replace(old, new.replace("{free_port}", str(free_port())))
    return text


def prepare_folder(folder: Path) -> dict[str, str]:
    """A work folder like a fresh clone's root, and the environment to run a block in it."""
    shutil.copytree(ROOT / "scenarios", folder / "scenarios")
    (folder / "tests").symlink_to(ROOT / "tests", target_is_directory=True)
    bin_dir = folder / ".bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    shim = bin_dir / "found-rl"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m found_rl "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("PYTHONWARNINGS", None)  # Python's defaults: user-facing warnings show, as for a user
    return env


def run_block(block: CodeBlock, folder: Path) -> subprocess.CompletedProcess[str]:
    env = prepare_folder(folder)
    script = folder / ("block.py" if RUN_LANGUAGES[block.language] == "python" else "block.sh")
    script.write_text(runnable_text(block))
    argv = [sys.executable, script.name] if script.suffix == ".py" else ["bash", "-euo", "pipefail", script.name]
    process = subprocess.Popen(
        argv, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = process.communicate(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"{block.test_id} ran past {BLOCK_TIMEOUT_S} s\n{stdout[-3000:]}\n{stderr[-3000:]}")
    finally:
        with contextlib.suppress(ProcessLookupError):  # a server the block left in the background
            os.killpg(process.pid, signal.SIGTERM)
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def check_parses(block: CodeBlock) -> None:
    """Each ``found-rl`` command parses with the real CLI parser, a ``found-rl train FILE`` resolves
    its run config as the command would before training; each ``python -m X`` imports."""
    from found_rl.cli import build_parser

    parser = build_parser()
    for command in shell_commands(block.text):
        if command[0] == "found-rl":
            try:
                args = parser.parse_args(command[1:])
            except SystemExit as exc:
                raise AssertionError(f"{block.test_id}: {shlex.join(command)} does not parse") from exc
            if command[1] == "train" and args.file is not None:
                from found_rl.train.config import load_run_config

                load_run_config(ROOT / args.file, args.overrides)  # paths as from a clone's root
        elif command[:2] == ["python", "-m"] and command[2] not in ("pip", "pytest"):
            assert importlib.util.find_spec(command[2]) is not None, f"{block.test_id}: no module {command[2]}"


def shell_commands(text: str) -> list[list[str]]:
    """The commands of a bash block: comments dropped, continuation lines joined."""
    commands, current = [], ""
    for line in text.splitlines():
        current += line.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        words = shlex.split(current, comments=True)
        if words:
            commands.append(words)
        current = ""
    return commands


BLOCKS = collect_blocks()


@pytest.mark.parametrize("block", BLOCKS, ids=[b.test_id for b in BLOCKS])
def test_documented_block_works(block: CodeBlock, tmp_path: Path) -> None:
    if block.mode == "skip":
        pytest.skip(f"docs-test: skip {block.reason}")
    if block.mode == "parse-only":
        check_parses(block)
        return
    result = run_block(block, tmp_path)
    report = (
        f"{block.test_id}, as run:\n{(tmp_path / result.args[-1]).read_text()}\n"
        f"--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}"
    )
    assert result.returncode == 0, report
    assert "Traceback" not in result.stderr, report
    assert not re.search(r"\w*Warning\b", result.stderr), report


def test_the_readme_has_python_and_bash_blocks_that_run() -> None:
    """Guards the collector itself: the README's examples are found and most really run."""
    readme = [b for b in BLOCKS if b.path == "README.md"]
    assert {b.language for b in readme if b.mode == "run"} >= {"python", "bash"}
    assert sum(b.mode == "run" for b in readme) >= 3


def test_ci_runs_the_readmes_own_install_and_test_commands() -> None:
    """.ci/run must not drift from what the README tells a new user to run."""
    readme_lines = {
        line.strip() for block in BLOCKS if block.path == "README.md" for line in block.text.splitlines()
    }
    ci_commands = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    ci_commands = [line for line in ci_commands if line.startswith("python -m")]
    assert any("pip install" in line for line in ci_commands) and any("pytest" in line for line in ci_commands)
    assert [line for line in ci_commands if line not in readme_lines] == []


@pytest.mark.parametrize(
    ("markdown", "message"),
    [
        ("<!-- docs-test: skipp typo -->\n```python\npass\n```\n", "unknown docs-test marker 'skipp'"),
        ("<!-- docs-test: skip -->\n```python\npass\n```\n", "needs a reason"),
        ('<!-- docs-test: replace "gone" "new" -->\n```bash\necho hi\n```\n', "no longer contains it"),
        ("<!-- docs-test: replace gone new -->\n```bash\necho gone\n```\n", "expected docs-test: replace"),
        ("<!-- docs-test: skip why -->\n\ntext\n```python\npass\n```\n", "must be right above a code fence"),
        ("text\n<!-- docs-test: skip why -->\n", "must be right above a code fence"),
    ],
)
def test_a_marker_that_cannot_be_honoured_is_an_error(markdown: str, message: str) -> None:
    with pytest.raises(MarkerError, match=re.escape(message)):
        parse_blocks("doc.md", markdown)


def test_blocks_are_collected_by_language_with_their_markers() -> None:
    markdown = (
        "```python\nprint(1)\n```\n"
        "```yaml\na: 1\n```\n"
        '<!-- docs-test: replace "--steps 2000" "--steps 20" -->\n'
        "```bash\nfound-rl expert collect --steps 2000 \\\n  --out x  # comment\n```\n"
        "~~~py\nx = '```'\n~~~\n"
    )
    blocks = parse_blocks("doc.md", markdown)
    assert [(b.line, b.language, b.mode) for b in blocks] == [
        (1, "python", "run"),
        (8, "bash", "run"),
        (12, "py", "run"),
    ]
    assert blocks[1].replacements == [("--steps 2000", "--steps 20")]
    assert "--steps 20 " in runnable_text(blocks[1])
    assert shell_commands(blocks[1].text) == [["found-rl", "expert", "collect", "--steps", "2000", "--out", "x"]]
    assert blocks[2].text == "x = '```'\n"

"""The command line imports only the module of the command it runs."""

import subprocess
import sys

from found_rl.cli import COMMANDS, build_parser


def _imported_after(argv: list[str]) -> set[str]:
    script = (
        "import sys\n"
        "from found_rl.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_a_command_does_not_import_the_others():
    modules = _imported_after(["scenario", "--help"])
    assert "found_rl.cli.scenario" in modules
    assert not {"found_rl.cli.train", "found_rl.cli.bench", "found_rl.train", "torch"} & modules


def test_the_top_level_help_imports_no_command():
    modules = _imported_after(["--help"])
    assert not {name for name in modules if name.startswith("found_rl.cli.")}


def test_the_whole_parser_still_lists_every_command_with_its_arguments():
    parser = build_parser()
    subparsers = next(action for action in parser._actions if action.dest == "command")
    assert set(subparsers.choices) == set(COMMANDS)
    assert any(action.dest == "resume" for action in subparsers.choices["train"]._actions)

"""``found-rl bench vlm``: its settings are checked before any model is built or served."""

import pytest

from found_rl import cli


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--methods", "lora,qlora"], "--methods must be a subset of lora,full"),
        (["--model", "."], "--model .: not a Hugging Face checkpoint folder"),
        (["--steps", "1"], "argument --steps: expected an int >= 2"),
    ],
)
def test_bad_settings_exit_2_naming_the_flag(argv, message, capsys):
    try:
        code = cli.main(["bench", "vlm", *argv])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]

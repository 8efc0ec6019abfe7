"""Output-path checks of the CLI: they run before any long job starts."""

import os

import pytest

from found_rl.cli.paths import check_output_dir, check_output_file
from found_rl.errors import UserError


@pytest.mark.parametrize(
    ("check", "make", "name", "message"),
    [
        (check_output_file, "dir", "x", "--out {p}: is a folder"),
        (check_output_file, "file", "x/r.json", "--out {p}: {parent} is a file, not a folder"),
        (check_output_dir, "file", "x", "--out {p}: is a file, not a folder"),
        (check_output_dir, "file", "x/sub/dir", "--out {p}: {parent} is a file, not a folder"),
    ],
)
def test_checks_name_the_flag_and_the_path(tmp_path, check, make, name, message):
    blocker = tmp_path / "x"
    blocker.mkdir() if make == "dir" else blocker.write_text("x")
    path = tmp_path / name
    with pytest.raises(ValueError) as caught:
        check(path, "--out")
    assert message.format(p=path, parent=blocker) in str(caught.value)


@pytest.mark.parametrize("check", [check_output_file, check_output_dir])
def test_new_paths_pass(tmp_path, check):
    check(tmp_path / "a" / "b", "--out")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="POSIX permissions; root writes anywhere")
@pytest.mark.parametrize("check", [check_output_file, check_output_dir])
def test_a_path_the_user_cannot_write_is_named(tmp_path, check):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(UserError, match=rf"--out {locked / 'new'}: cannot create it in {locked} \(permission"):
            check(locked / "new", "--out")
    finally:
        locked.chmod(0o700)

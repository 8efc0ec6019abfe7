import argparse
import re
import socket

import pytest

from vlm_server.cli import add_arguments, config_from_args, parse_options


@pytest.fixture
def no_serving(monkeypatch):
    """A mistake that slips through must fail the test, not start a server that never stops."""

    def refuse(app, **kwargs):
        raise AssertionError(f"the server would have started on {kwargs}")

    monkeypatch.setattr("aiohttp.web.run_app", refuse)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_options_are_json_when_possible_else_strings():
    options = parse_options(
        ["base_ms=5", "pretrained=null", "name=ViT-B-16", "flags=[1, 2]"], "--x"
    )
    assert options == {
        "base_ms": 5,
        "pretrained": None,
        "name": "ViT-B-16",
        "flags": [1, 2],
    }
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_options(["oops"], "--advisor-option")


def test_flags_build_a_validated_config(monkeypatch):
    monkeypatch.delenv("VLM_SERVER_TOKEN", raising=False)
    args = parse(
        [
            "--advisor",
            "fixed-cost",
            "--advisor-option",
            "base_ms=3",
            "--max-batch-size",
            "16",
            "--port",
            "0",
        ]
    )
    config = config_from_args(args)
    assert config.advisor.spec == "fixed-cost" and config.advisor.options == {
        "base_ms": 3
    }
    assert (
        config.advisor.batching.max_batch_size == 16
        and config.clip is None
        and config.port == 0
    )


def test_admission_by_predicted_wait_is_on_by_default_and_a_flag_turns_it_off():
    assert config_from_args(parse(["--advisor", "fixed-cost"])).advisor.batching.admit_by_predicted_wait
    args = parse(["--advisor", "fixed-cost", "--clip", "fixed-cost", "--no-admit-by-predicted-wait"])
    config = config_from_args(args)
    assert not config.advisor.batching.admit_by_predicted_wait
    assert not config.clip.batching.admit_by_predicted_wait


def test_config_file_is_merged_with_flags_and_token_comes_from_the_environment(
    tmp_path, monkeypatch
):
    path = tmp_path / "server.yaml"
    path.write_text(
        "host: 0.0.0.0\nclip:\n  spec: fixed-cost-clip\n  batching: {max_wait_ms: 7}\n"
    )
    with pytest.raises(ValueError, match="token"):
        config_from_args(parse(["--config", str(path)]))
    monkeypatch.setenv("VLM_SERVER_TOKEN", "from-the-environment")
    config = config_from_args(parse(["--config", str(path), "--max-batch-size", "4"]))
    assert config.token == "from-the-environment"
    assert (
        config.clip.batching.max_wait_ms == 7
        and config.clip.batching.max_batch_size == 4
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "no backend"),
        (["--advisor-option", "a=1"], "without --advisor"),
        (
            ["--advisor", "fixed-cost", "--max-batch-size", "0"],
            "advisor.batching.max_batch_size",
        ),
        (["--config", "/nonexistent/server.yaml"], "does not exist"),
        (
            ["--advisor", "fixed-cost", "--max-body-mb", "0"],
            r"max_body_bytes \(--max-body-mb\)",
        ),
        (["--advisor", "fixed-cost", "--port", "70000"], r"port \(--port\)"),
        (["--advisor", "fixed-cost", "--max-wait-ms", "-1"], r"\(--max-wait-ms\)"),
    ],
)
def test_mistakes_name_the_field(argv, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        config_from_args(parse(argv))


def test_found_rl_serve_has_the_same_options():
    from found_rl.cli import serve

    parser = argparse.ArgumentParser()
    serve.configure(parser)
    args = parser.parse_args(
        [
            "--advisor",
            "fixed-cost",
            "--clip",
            "openclip",
            "--clip-option",
            "image_size=192",
        ]
    )
    assert args.run is serve.run
    assert config_from_args(args).clip.options == {"image_size": 192}


def test_unknown_backend_path_is_a_clear_error(server_config):
    from vlm_server.app import create_app
    from vlm_server.config import BackendConfig

    with pytest.raises(ValueError, match="cannot import module"):
        create_app(server_config(advisor=BackendConfig(spec="no_such_module:Thing")))
    with pytest.raises(ValueError, match="'module:Class'"):
        create_app(server_config(advisor=BackendConfig(spec="just-a-name")))


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--max-body-mb", "inf"], "--max-body-mb"),
        (["--max-body-mb", "nan"], "--max-body-mb"),
        (["--request-timeout-ms", "inf"], "--request-timeout-ms"),
        (["--max-wait-ms", "nan"], "--max-wait-ms"),
        (["--log-level", "LOUD"], "--log-level"),
    ],
)
def test_bad_flag_values_exit_2_naming_the_flag(argv, flag, capsys, no_serving):
    from vlm_server.__main__ import main

    with pytest.raises(SystemExit) as exited:
        main(["--advisor", "fixed-cost", *argv])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("port: [\n", r"server\.yaml: line 2, column 1: not valid YAML"),
        (b"\xff\xfe", r"server\.yaml: not UTF-8"),
        (
            "advisor: fixed-cost\n",
            r"server\.yaml: advisor: Input should be a valid dictionary",
        ),
        (
            "advisor: {spec: fixed-cost, options: 5}\n",
            r"advisor\.options: Input should be a valid dictionary",
        ),
        (
            "advisor: {spec: fixed-cost}\nrequest_timeout_ms: .inf\n",
            "request_timeout_ms: Input should be a finite number",
        ),
        (
            "advisor: {spec: fixed-cost}\nhost: 0.0.0.0\n",
            r"server\.yaml: host='0\.0\.0\.0' is not a loopback",
        ),
    ],
)
def test_bad_config_files_exit_2_naming_the_file_and_field(
    tmp_path, monkeypatch, capsys, no_serving, text, message
):
    from vlm_server.__main__ import main

    monkeypatch.delenv("VLM_SERVER_TOKEN", raising=False)
    path = tmp_path / "server.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    # flags merged into a malformed section must not crash the merge
    assert (
        main(
            ["--config", str(path), "--advisor-option", "a=1", "--max-batch-size", "2"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert "Traceback" not in err and "Value error" not in err


def test_config_that_is_a_directory_is_named(tmp_path):
    with pytest.raises(ValueError, match="is not a file"):
        config_from_args(parse(["--config", str(tmp_path)]))


def test_backend_option_rejected_by_the_constructor_names_the_backend(
    capsys, no_serving
):
    from vlm_server.__main__ import main

    assert main(["--advisor", "fixed-cost", "--advisor-option", "base_ms=-1"]) == 2
    assert "backend 'fixed-cost': bad options ['base_ms']" in capsys.readouterr().err


def test_an_option_the_backend_does_not_take_exits_2_naming_it(capsys, no_serving):
    from vlm_server.__main__ import main

    assert main(["--advisor", "fixed-cost", "--advisor-option", "base_msec=1"]) == 2
    assert "backend 'fixed-cost': bad options ['base_msec']" in capsys.readouterr().err


@pytest.mark.parametrize("error", [ValueError, TypeError])
def test_an_error_inside_a_backend_constructor_is_a_bug_not_the_users(monkeypatch, capsys, no_serving, error):
    from vlm_server.__main__ import main
    from vlm_server.backends.fixed_cost import FixedCostAdvisor

    def broken_init(self, base_ms=20.0):
        raise error("an internal check of ours failed")

    monkeypatch.setattr(FixedCostAdvisor, "__init__", broken_init)
    with pytest.raises(error, match="an internal check of ours failed") as raised:
        main(["--advisor", "fixed-cost", "--advisor-option", "base_ms=5"])
    assert raised.traceback[-1].name == "broken_init"  # its own traceback, not a re-raise
    assert "vlm_server: error" not in capsys.readouterr().err


def test_port_in_use_exits_2_naming_the_port(capsys, python_ctrl_c):
    """aiohttp's run_app hands Ctrl-C back to Python's own handler when it stops (python_ctrl_c)."""
    from vlm_server.__main__ import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["--advisor", "fixed-cost", "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 2 and f"--host/--port: cannot listen on 127.0.0.1:{port}" in err


def test_an_os_error_while_loading_a_model_is_not_blamed_on_the_port(monkeypatch, capsys):
    from vlm_server import app
    from vlm_server.__main__ import main

    def load_fails(config):  # run_server loads the models before it binds
        raise OSError(5, "Input/output error", "/models/weights.safetensors")

    monkeypatch.setattr(app, "run_server", load_fails)
    with pytest.raises(OSError, match="Input/output error") as raised:
        main(["--advisor", "fixed-cost"])
    assert raised.traceback[-1].name == "load_fails"
    assert "cannot listen" not in capsys.readouterr().err


def test_a_missing_config_file_exits_2_in_one_line(capsys, tmp_path):
    from vlm_server.__main__ import main

    assert main(["--config", str(tmp_path / "server.yaml")]) == 2
    assert capsys.readouterr().err == f"vlm_server: error: server config {tmp_path / 'server.yaml'} does not exist\n"

import argparse

import pytest

from vlm_server.cli import add_arguments, config_from_args, parse_options


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

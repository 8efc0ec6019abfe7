"""``found-rl vlm`` end to end on CPU: collect -> init -> finetune -> evaluate -> serve -> ``eval --agent advisor:``.

``vlm init --preset tiny`` makes the VLM and a few steps train it, so the scores mean nothing;
what is checked is that every stage reads what the previous one wrote and the served model
drives a closed-loop route.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.optional import require

require("transformers", "peft")  # optional extra: found-rl[hf]
# ruff: noqa: E402 (the imports below come after the check, as after pytest.importorskip)

from found_rl import cli
from found_rl.dataset.synthetic import write_synthetic_dataset
from found_rl.vlm.scratch import PRESETS, init_advisor

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "found_rl" / "evaluation" / "data"


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from tests.tiny_vlm import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def short_town(tmp_path) -> Path:
    """The one-route tiny town with 1 s episodes: several episodes in a few dozen steps."""
    (tmp_path / "quickstart_one_route.xml").write_text((DATA / "quickstart_one_route.xml").read_text())
    scenario = (DATA / "tiny_town.yaml").read_text().replace("max_steps: 400", "max_steps: 10")
    assert "max_steps: 10" in scenario
    path = tmp_path / "short_town.yaml"
    path.write_text(scenario)
    return path


class Server:
    """``python -m found_rl serve`` with the HF backend on a free loopback port."""

    def __init__(self, model: Path, log: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        self.log = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "found_rl", "serve", "--port", str(self.port), "--advisor", "hf",
             "--advisor-option", f"model={model}", "--max-batch-size", "4", "--log-level", "WARNING"],
            env=env, stdout=subprocess.DEVNULL, stderr=self.log,
        )

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "the server exited while loading the model"
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise TimeoutError("the advisor server did not become ready")

    def items_served(self) -> float:
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as response:
            text = response.read().decode()
        line = next(x for x in text.splitlines() if x.startswith('vlm_server_batch_size_sum{backend="advisor"}'))
        return float(line.split()[-1])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


@pytest.mark.slow
def test_collect_init_finetune_evaluate_serve_and_drive(tmp_path, short_town, capsys):
    data, model, run = tmp_path / "data", tmp_path / "model", tmp_path / "run"
    code, _, err = run_cli(
        ["expert", "collect", "--scenario", str(short_town), "--steps", "30", "--out", str(data), "--no-progress"],
        capsys,
    )
    assert code == 0, err
    code, out, err = run_cli(["vlm", "init", "--preset", "tiny", "--out", str(model)], capsys)
    assert code == 0, err
    assert f"untrained tiny advisor VLM to {model}" in out and "--max-minutes 30" in out

    code, out, err = run_cli(
        ["vlm", "finetune", "--data", str(data), "--model", str(model), "--out", str(run),
         "--steps", "3", "--batch-size", "4", "--eval-fraction", "0.34", "--eval-every", "3", "--no-progress"],
        capsys,
    )
    assert code == 0, err
    assert "trained 3 steps" in out and f"model_path={run / 'model'}" in out
    settings = json.loads((run / "config.json").read_text())  # a `vlm init` model trains fully, at its own rate
    assert settings["method"] == "full" and settings["learning_rate"] == PRESETS["tiny"].learning_rate
    summary = json.loads((run / "summary.json").read_text())
    assert summary["eval_episodes"] and summary["eval_samples"] > 0

    code, out, err = run_cli(
        ["vlm", "evaluate", "--data", str(data), "--model", str(run / "model"), "--json", "--no-progress"], capsys
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["samples"] == summary["eval_samples"]  # the held-out episodes the model never trained on
    assert report["split"] == {"name": "eval", "eval_fraction": 0.34, "split_seed": 0}
    assert 0.0 <= report["parse_rate"] <= 1.0 and 0.0 <= report["class_agreement"] <= report["parse_rate"]
    for key in ("mae_acc", "mae_steer"):  # null when no answer parsed (strict JSON, no NaN)
        assert report[key] is None if report["parsed"] == 0 else report[key] >= 0.0

    server = Server(run / "model", tmp_path / "server.log")
    try:
        server.wait_ready()
        results = tmp_path / "results.json"
        code, _, err = run_cli(
            ["eval", "--scenario", str(short_town), "--agent", f"advisor:{server.url}", "--out", str(results),
             "--no-progress"],
            capsys,
        )
        assert code == 0, err
        served = server.items_served()
    finally:
        server.stop()
    records = json.loads(results.read_text())["_checkpoint"]["records"]
    assert len(records) == 1 and "score_composed" in records[0]["scores"]
    assert served >= 5  # the route was driven by the served model's answers, one request per step


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["finetune", "--data", "nodata", "--model", "MODEL", "--out", "run"], "--data nodata: no such folder"),
        (["finetune", "--data", "empty", "--model", "MODEL", "--out", "run"], "no dataset manifest"),
        (["finetune", "--data", "empty", "--model", "nomodel", "--out", "run"], "--model nomodel: no such folder"),
        (["finetune", "--data", "empty", "--model", "MODEL", "--out", "afile"], "--out afile: is a file"),
        (["finetune", "--data", "empty", "--model", "MODEL", "--out", "run", "--steps", "0"], "--steps"),
        (["finetune", "--data", "data", "--model", "MODEL", "--out", "run", "--max-minutes", "0"], "--max-minutes"),
        (["finetune", "--data", "data", "--model", "MODEL", "--out", "run", "--max-minutes", "-1"], "--max-minutes"),
        (["finetune", "--data", "data", "--model", "empty", "--out", "run", "--eval-fraction", "0"],
         "empty: no config.json there (the folder is empty), so it is not a Hugging Face checkpoint folder"),
        (["finetune", "--data", "data", "--model", "textonly", "--out", "run", "--eval-fraction", "0"],
         "model type 'llama' (architectures: LlamaForCausalLM) is not an image-text-to-text model"),
        (["finetune", "--data", "data", "--model", "scratch", "--out", "run", "--eval-fraction", "0", "--lora"],
         "--lora: model"),
        (["finetune", "--data", "data", "--model", "MODEL", "--out", "run", "--full", "--aux-action-weight", "-1"],
         "--aux-action-weight: expected a finite number >= 0, got '-1'"),
        (["finetune", "--data", "data", "--model", "MODEL", "--out", "run", "--full", "--vision-warmup-steps", "-2"],
         "--vision-warmup-steps: expected an int >= 0, got -2"),
        (["finetune", "--data", "data", "--model", "MODEL", "--out", "run", "--full", "--vision-warmup-steps", "5"],
         "--vision-warmup-steps 5: only the auxiliary action loss trains during the warm-up"),
        (["finetune", "--data", "data", "--model", "MODEL", "--out", "run", "--aux-action-weight", "0.5"],
         "--aux-action-weight: LoRA adapts the language model only"),
        (["finetune", "--data", "data", "--model", "MODEL", "--out", "run", "--full", "--freeze-vision",
          "--aux-action-weight", "0.5"], "--aux-action-weight: the auxiliary loss trains the vision tower"),
        (["evaluate", "--data", "data", "--model", "empty", "--split", "all"],
         "no config.json there (the folder is empty)"),
        (["init", "--preset", "tiny", "--out", "afile"], "--out afile: is a file"),
        (["init", "--preset", "tiny", "--out", "data"], "--out data: folder is not empty"),
        (["init", "--preset", "huge", "--out", "new"], "--preset: invalid choice: 'huge'"),
        (["init", "--preset", "tiny", "--out", "new", "--image-px", "40"],
         "--image-px 40 must be a multiple of --patch-px 16"),
        (["init", "--preset", "tiny", "--out", "new", "--hidden", "48"], "--hidden must be a multiple of 32"),
        (["init", "--preset", "tiny", "--out", "new", "--layers", "0"], "--layers: expected an int >= 1, got 0"),
        (["evaluate", "--data", "empty", "--model", "MODEL"], "no dataset manifest"),
        (["evaluate", "--data", "empty", "--model", "MODEL", "--eval-fraction", "1.5"], "--eval-fraction"),
        (["evaluate", "--data", "data", "--model", "MODEL", "--eval-fraction", "0"], "--split eval: --data data has"),
        (["evaluate", "--data", "data", "--model", "MODEL", "--eval-fraction", "0.5"], "1 episode(s), so none"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, tiny_model, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    Path("empty").mkdir()
    Path("afile").write_text("x")
    write_synthetic_dataset("data", episodes=1, steps=2)
    if "textonly" in argv:
        from transformers import LlamaConfig, LlamaForCausalLM

        LlamaForCausalLM(LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                                     num_attention_heads=1)).save_pretrained("textonly")
    if "scratch" in argv:
        init_advisor("scratch", "tiny")
    code, _, err = run_cli(["vlm", *[str(tiny_model) if a == "MODEL" else a for a in argv]], capsys)
    assert code == 2
    assert message in err.strip().splitlines()[-1], err  # argparse's own errors come after its usage line


def test_dataset_without_chat_turns_is_refused_naming_the_sample(tmp_path, tiny_model, capsys, drop_shard_members):
    data = write_synthetic_dataset(tmp_path / "data", episodes=1, steps=2)
    drop_shard_members(data / "shard-000000.tar", ".chat.json")
    code, _, err = run_cli(
        ["vlm", "finetune", "--data", str(data), "--model", str(tiny_model), "--out", str(tmp_path / "run")], capsys
    )
    assert code == 2
    assert "sample 000000000: lacks chat.json" in err and "has no chat turn" in err

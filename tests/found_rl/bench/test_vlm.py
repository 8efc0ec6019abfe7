"""``found-rl bench vlm``: its settings are checked before any model is built or served."""

import pytest

from found_rl import cli


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--methods", "lora,qlora"], "--methods must be a subset of lora,full"),
        (["--torch-threads", "0"], "argument --torch-threads: expected an int >= 1"),
        (["--training-scenario", "nowhere.yaml"], "--training-scenario nowhere.yaml: no such file"),
        (["--advisor-option", "fast"], "--advisor-option 'fast': expected KEY=VALUE"),
        (["--model", "."], "--model .: not a Hugging Face checkpoint folder"),
        (["--steps", "1"], "argument --steps: expected an int >= 2"),
        (["--batch-sizes", "1,0"], "argument --batch-sizes: expected distinct ints >= 1 separated by commas"),
        (["--batch-sizes", "4,4"], "argument --batch-sizes: expected distinct ints >= 1 separated by commas"),
    ],
)
def test_bad_settings_exit_2_naming_the_flag(argv, message, capsys):
    try:
        code = cli.main(["bench", "vlm", *argv])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_the_report_has_answers_per_s_alone_and_beside_training(monkeypatch, tmp_path):
    """The keys and table of a run, with the serving levels and the training run stubbed (the
    real levels are covered by the quick run below; a training run takes a minute to start)."""
    import argparse

    from found_rl.bench import vlm

    started = []

    class FakeTraining:
        def __init__(self, scenario, folder):
            started.append(scenario)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    async def serve_row(batch, model, args):
        return {"max_batch_size": batch, "clients": 4, "requests_per_s": 10.0 * batch + (len(started) and 1),
                "replies": 9, "mean_batch_size": 1.0, "p50_ms": 1.0, "p95_ms": 2.0, "lost": 0,
                "server_cpu_cores": 0.5, "load_average": 1.0, "beside_training": False}

    monkeypatch.setattr(vlm, "TrainingLoad", FakeTraining)
    monkeypatch.setattr(vlm, "_serve_row", serve_row)
    monkeypatch.setattr(vlm, "default_model", lambda folder: folder)
    args = argparse.Namespace(model=None, beside="train", training_scenario=vlm.TRAINING_SCENARIO, device="cpu",
                              torch_threads=1, advisor_option=[], batch_size=8,
                              batch_sizes=vlm.BATCH_SIZES)
    report = vlm._benchmark(args, [], tmp_path)
    assert started == [vlm.TRAINING_SCENARIO]
    assert report["answers_per_s_b1"] == 10.0 and report["answers_per_s_b32"] == 320.0
    assert report["answers_per_s_b4_beside_training"] == 41.0
    assert {"load_average_b32", "load_average_b32_beside_training", "torch_threads"} <= set(report)
    table = vlm._table(report)
    assert "alone" in table and "train" in table and "1.02x" in table  # 41 / 40 at batch 4
    assert report["batch_sizes"] == [1, 4, 32] and "max batch 32 vs 1: 32.00x" in table


@pytest.mark.slow
def test_a_quick_run_serves_the_model_for_real(capsys):
    """One level (a server start of about 12 s); the levels' comparison is the stubbed test's."""
    import json

    pytest.importorskip("transformers")
    code = cli.main(["bench", "vlm", "--quick", "--methods", "none", "--beside", "none", "--requests", "24",
                     "--duration-s", "2", "--clients", "8", "--max-new-tokens", "2", "--batch-sizes", "8",
                     "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["answers_per_s_b8"] > 0 and "answers_per_s_b8_beside_training" not in report
    assert report["batch_sizes"] == [8] and report["serve"][0]["max_batch_size"] == 8
    assert report["torch_threads"] == 1 and report["finetune"] == []

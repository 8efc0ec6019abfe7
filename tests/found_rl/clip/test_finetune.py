"""Fine-tuning end to end on a synthetic dataset: checkpoint round trip, stopping rules, resume, the random model."""

from pathlib import Path

import numpy as np
import pytest
import torch

from found_rl.clip.data import load_frames, split_by_episode
from found_rl.clip.evaluate import evaluate, held_out_scope, model_probabilities, scorer_probabilities
from found_rl.clip.finetune import TAGS, DataInfo, FinetuneConfig, Finetuner
from tests.found_rl.clip.conftest import write_dataset
from vlm_server.backends.base import ClipItem
from vlm_server.backends.clip import OpenClipScorer
from vlm_server.clip_checkpoint import read_checkpoint


def make_finetuner(
    tmp_path: Path, model_name: str, epochs: int | None, resume: bool = False, logdir: Path | None = None,
    clock=None, **overrides
) -> Finetuner:
    data = tmp_path / "data"
    if not data.exists():
        write_dataset(data, episodes=8, frames_per_episode=24, side=32)
    frames = load_frames(data, 16, show_progress=False, image_input=overrides.get("image_input", "rgb"))
    split = split_by_episode(frames.episodes, 0.25, seed=0, source=str(data))
    held = split.held_out_mask(frames.episodes)
    from found_rl.clip.evaluate import dataset_fingerprint

    config = FinetuneConfig(
        model_name, None, 16, epochs=epochs, batch_size=24, lr=5e-3, warmup_steps=5, **overrides
    )
    info = DataInfo(str(data), dataset_fingerprint(data), frames.input_size, split, 0.25)
    timing = {} if clock is None else {"clock": clock}
    return Finetuner(
        config, frames.subset(~held), frames.subset(held), info, tmp_path / "clip.pt", resume=resume, logdir=logdir,
        **timing,
    )


class FakeClock:
    """A clock that advances ``step_s`` seconds each time it is read."""

    def __init__(self, step_s: float) -> None:
        self.now, self.step_s = 0.0, step_s

    def __call__(self) -> float:
        self.now += self.step_s
        return self.now


@pytest.mark.parametrize(
    ("objective", "image_input"),
    [("logit-adjusted", "rgb"), ("contrastive", "rgb"), ("logit-adjusted", "rgb-history")],
)
def test_a_trained_checkpoint_round_trips_through_the_server(tmp_path, micro_model, objective, image_input):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    torch.manual_seed(0)
    finetuner = make_finetuner(
        tmp_path, micro_model, epochs=1, logdir=tmp_path / "runs", log_every_steps=1,
        objective=objective, image_input=image_input,
    )
    result = finetuner.run(show_progress=False)
    assert result["steps"] == finetuner.total_steps == len(finetuner.train_frames) // 24
    assert result["stopped_by"] == "--epochs 1"
    assert set(result["validation"]) == {"auc", "top1", "model_auc", "auc_lift"}
    events = EventAccumulator(str(tmp_path / "runs"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == set(TAGS)
    checkpoint = read_checkpoint(tmp_path / "clip.pt")
    recorded = (checkpoint.objective, checkpoint.image_input, checkpoint.context)
    assert recorded == (objective, image_input, "command-speed")
    # the served scorer, loaded from the checkpoint, gives the training-time probabilities
    scorer = OpenClipScorer(checkpoint=str(tmp_path / "clip.pt"), image_input=image_input)
    scorer.load()
    assert scorer.image_hw == (32, 32) and scorer.model_side == 16
    held = finetuner.held_out
    trained = model_probabilities(
        finetuner.model, finetuner.tokens, held, finetuner.clip.mean, finetuner.clip.std, torch.device("cpu")
    )
    np.testing.assert_allclose(scorer_probabilities(scorer, held), trained, atol=1e-5)
    # and a served 32 px request is resized exactly as the dataset was
    data_frames = load_frames(tmp_path / "data", 32, show_progress=False, use_cache=False, image_input=image_input)
    row = data_frames.command_rows[30]
    stack = data_frames.inputs(np.array([30]))[0]
    history = tuple(stack[:-1]) if image_input == "rgb-history" else ()
    item = ClipItem("x", data_frames.images[30], int(row) + 1, 3.0, (0.0, 0.0), history)
    served = scorer.anchor_probabilities([item])
    small = load_frames(tmp_path / "data", 16, show_progress=False, image_input=image_input)
    np.testing.assert_allclose(
        served, scorer.group_probabilities(small.inputs(np.array([30])), [row], [2]), atol=1e-6
    )


def test_max_minutes_alone_repeats_epochs_until_the_time_is_used(tmp_path, micro_model):
    """A clock read once a step at 1 s a step: a 0.2-minute budget is 12 steps, two epochs of 6 and no more."""
    finetuner = make_finetuner(tmp_path, micro_model, epochs=None, max_minutes=0.2, clock=FakeClock(1.0))
    assert finetuner.total_steps is None and finetuner.steps_per_epoch == 6
    result = finetuner.run(show_progress=False)
    assert result["stopped_by"] == "--max-minutes 0.2"
    assert result["steps"] == 12 and result["epochs"] == pytest.approx(2.0)
    assert read_checkpoint(tmp_path / "clip.pt").training["elapsed_s"] == pytest.approx(result["elapsed_s"])


def test_with_epochs_and_max_minutes_the_first_rule_reached_stops_the_run(tmp_path, micro_model):
    finetuner = make_finetuner(tmp_path, micro_model, epochs=1, max_minutes=60.0, clock=FakeClock(1.0))
    result = finetuner.run(show_progress=False)
    assert (result["stopped_by"], result["steps"]) == ("--epochs 1", 6)


def test_junction_balancing_needs_junction_frames(tmp_path, micro_model):
    with pytest.raises(ValueError, match=r"--junction-share 0\.3: the training frames hold 0 junction"):
        make_finetuner(tmp_path, micro_model, epochs=1, junction_share=0.3)


def test_a_random_weight_model_scores_about_one_half(tmp_path, micro_model):
    torch.manual_seed(1)
    finetuner = make_finetuner(tmp_path, micro_model, epochs=1)
    finetuner.save()  # step 0: the random initialisation
    scorer = OpenClipScorer(checkpoint=str(tmp_path / "clip.pt"))
    scorer.load()
    frames = load_frames(tmp_path / "data", 16, show_progress=False)
    scored, scope = held_out_scope(frames, read_checkpoint(tmp_path / "clip.pt").training, tmp_path / "data")
    assert scope.startswith("held-out episodes (2 of 8")
    result = evaluate(scorer, frames, scored, scope)
    assert result.quality.auc == pytest.approx(0.5, abs=0.12)
    assert result.prior is not None


def test_resume_continues_at_the_saved_step_with_the_same_weights(tmp_path, micro_model):
    torch.manual_seed(0)
    straight = make_finetuner(tmp_path / "a", micro_model, epochs=2)
    straight.run(show_progress=False)
    torch.manual_seed(0)
    first = make_finetuner(tmp_path / "b", micro_model, epochs=2, checkpoint_every_steps=1)
    train_step = first._train_step

    def killed_after_one_step(batch, lr):
        if first.step == 1:
            raise KeyboardInterrupt
        return train_step(batch, lr)

    first._train_step = killed_after_one_step
    with pytest.raises(KeyboardInterrupt):
        first.run(show_progress=False)
    resumed = make_finetuner(tmp_path / "b", micro_model, epochs=2, resume=True)
    assert resumed.step == 1
    resumed.run(show_progress=False)
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values()):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4, msg=name)


def test_resume_refuses_another_configuration(tmp_path, micro_model):
    make_finetuner(tmp_path, micro_model, epochs=1).save()
    with pytest.raises(ValueError, match="trained with epochs=1, this run has 3"):
        make_finetuner(tmp_path, micro_model, epochs=3, resume=True)


def test_the_checkpoint_records_the_training_episodes_towns(tmp_path, micro_model):
    from tests.town_datasets import Row, write_town_dataset

    rows = [Row(episode, f"T{episode}", f"net-{episode}") for episode in range(4) for _ in range(6)]
    write_town_dataset(tmp_path / "data", rows, image_px=32)
    frames = load_frames(tmp_path / "data", 16, show_progress=False)
    split = split_by_episode(frames.episodes, 0.25, seed=0, source="data")
    held = split.held_out_mask(frames.episodes)
    from found_rl.clip.evaluate import dataset_fingerprint

    info = DataInfo(str(tmp_path / "data"), dataset_fingerprint(tmp_path / "data"), 32, split, 0.25)
    config = FinetuneConfig(micro_model, None, 16, epochs=1, batch_size=6)
    Finetuner(config, frames.subset(~held), frames.subset(held), info, tmp_path / "clip.pt").save()
    expected = {f"net-{e}": f"T{e}" for e in range(4) if e not in split.held_out}
    assert len(expected) == 3
    assert read_checkpoint(tmp_path / "clip.pt").training["training_towns"] == expected

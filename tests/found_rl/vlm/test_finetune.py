"""Fine-tuning on the tiny LLaVA: learning, exact resume, the servable export, logging, bad input."""

import json
import math
import time
from dataclasses import replace

import pytest
import torch

from found_rl.vlm.batches import encode_batch
from found_rl.vlm.config import FinetuneConfig
from found_rl.vlm.examples import load_chat_examples
from found_rl.vlm.finetune import AUX_TAGS, TAGS, Finetuner, batch_indices, is_vision_tower_weight
from found_rl.vlm.lora import LoraSettings
from vlm_server.backends.hf_vlm import HuggingFaceAdvisor

AUX = {"method": "full", "aux_action_weight": 0.5, "vision_warmup_steps": 1}
"""Full training with the auxiliary action head and one step of vision warm-up."""


def config(data, model, out, **overrides) -> FinetuneConfig:
    settings = {"batch_size": 2, "eval_every": 2, "eval_samples": 4, "save_every": 2, "log_every": 1, "seed": 1}
    settings.update(overrides)
    return FinetuneConfig(data=str(data), model=str(model), out=str(out), **settings)


def scalars(run, tag) -> list[float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    return [event.value for event in events.Scalars(tag)]


def test_each_epoch_visits_every_example_once_in_a_seeded_order():
    seen = [i for k in range(6) for i in batch_indices(k, 3, 9, seed=5)]  # two epochs of 9
    assert sorted(seen[:9]) == list(range(9)) and sorted(seen[9:]) == list(range(9))
    assert seen[:9] != seen[9:]
    assert batch_indices(4, 3, 9, seed=5) == seen[12:15]
    assert batch_indices(0, 3, 9, seed=6) != seen[:3]


def test_full_fine_tuning_lowers_the_answer_loss(expert_data, tiny_vlm_dir, tmp_path):
    finetuner = Finetuner(
        config(expert_data, tiny_vlm_dir, tmp_path / "run", method="full", steps=8, learning_rate=1e-2, eval_every=0),
        show_progress=False,
    )
    before = finetuner.eval_loss_on(finetuner.train[:4])
    summary = finetuner.run()
    after = finetuner.eval_loss_on(finetuner.train[:4])
    assert after < before - 0.5, (before, after)
    assert summary["steps"] == 8 and summary["tokens_per_s"] > 0 and summary["samples_per_s"] > 0


@pytest.mark.parametrize("settings", [{}, AUX], ids=["lora", "full-with-aux-head"])
def test_resumed_run_ends_where_an_uninterrupted_one_does(expert_data, tiny_vlm_dir, tmp_path, monkeypatch, settings):
    straight = Finetuner(config(expert_data, tiny_vlm_dir, tmp_path / "a", steps=4, **settings), show_progress=False)
    straight.run()
    interrupted = Finetuner(config(expert_data, tiny_vlm_dir, tmp_path / "b", steps=4, **settings),
                            show_progress=False)
    train_step = interrupted._train_step

    def crash_in_step_three():
        if interrupted.step == 2:  # after the step-2 checkpoint
            raise KeyboardInterrupt
        return train_step()

    monkeypatch.setattr(interrupted, "_train_step", crash_in_step_three)
    with pytest.raises(KeyboardInterrupt):
        interrupted.run()
    assert not (tmp_path / "b" / "model").exists()
    resumed = Finetuner(config(expert_data, tiny_vlm_dir, tmp_path / "b", steps=4, **settings), resume=True,
                        show_progress=False)
    assert resumed.step == 2
    resumed.run()
    for name, value in straight.checkpoint_weights().items():
        assert torch.equal(value, resumed.checkpoint_weights()[name]), name
    heads = [torch.load(tmp_path / run / "checkpoint.pt", weights_only=True).get("aux_head") for run in "ab"]
    assert (heads[0] is None) == (not settings) and (heads[1] is None) == (not settings)
    for name, value in (heads[0] or {}).items():
        assert torch.equal(value, heads[1][name]), name


def test_exported_lora_model_is_merged_and_serves_as_trained(expert_data, tiny_vlm_dir, tmp_path, monkeypatch):
    finetuner = Finetuner(
        config(expert_data, tiny_vlm_dir, tmp_path / "run", steps=3, learning_rate=5e-2), show_progress=False
    )
    batch = encode_batch(finetuner.processor, load_chat_examples(expert_data)[:2])
    export, logits = Finetuner.export, {}

    def export_after_recording_the_adapted_logits(self):
        self.model.eval()
        with torch.no_grad():
            logits["adapted"] = self.model(**batch).logits
        return export(self)

    monkeypatch.setattr(Finetuner, "export", export_after_recording_the_adapted_logits)
    finetuner.run()
    trained = logits["adapted"]
    model_dir = tmp_path / "run" / "model"
    assert not (model_dir / "adapter_config.json").exists()  # plain weights, no peft needed
    advisor = HuggingFaceAdvisor(model_path=str(model_dir))  # no extra options
    advisor.load()
    assert advisor.image_hw == (192, 192)
    with torch.no_grad():
        served = advisor.model(**batch).logits
    torch.testing.assert_close(served, trained, rtol=1e-4, atol=1e-4)
    base = HuggingFaceAdvisor(model_path=str(tiny_vlm_dir))
    base.load()
    with torch.no_grad():
        assert not torch.allclose(base.model(**batch).logits, trained, atol=1e-3)  # training changed it
    card = json.loads((model_dir / "found_rl_advisor.json").read_text())
    assert card["image_hw"] == [192, 192] and card["method"] == "lora" and card["steps"] == 3


def test_run_folder_holds_config_summary_and_the_tensorboard_tags(expert_data, tiny_vlm_dir, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    Finetuner(config(expert_data, tiny_vlm_dir, tmp_path / "run", steps=2), show_progress=False).run()
    run = tmp_path / "run"
    assert json.loads((run / "config.json").read_text())["steps"] == 2
    summary = json.loads((run / "summary.json").read_text())
    assert set(summary["train_episodes"]) | set(summary["eval_episodes"]) == {0, 1, 2, 3}
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == set(TAGS)


def test_lora_target_missing_from_the_language_model_is_named(expert_data, tiny_vlm_dir, tmp_path):
    with pytest.raises(ValueError, match=r"--lora-targets: qkv not in the language model.*q_proj"):
        Finetuner(config(expert_data, tiny_vlm_dir, tmp_path / "run", lora=LoraSettings(targets=("q_proj", "qkv"))))


def test_non_empty_out_needs_resume_and_resume_needs_the_same_settings(expert_data, tiny_vlm_dir, tmp_path):
    Finetuner(config(expert_data, tiny_vlm_dir, tmp_path / "run", steps=1), show_progress=False).run()
    with pytest.raises(ValueError, match="not empty; pass --resume"):
        Finetuner(config(expert_data, tiny_vlm_dir, tmp_path / "run", steps=2))
    with pytest.raises(ValueError, match=r"other settings.*batch_size"):
        Finetuner(config(expert_data, tiny_vlm_dir, tmp_path / "run", steps=2, batch_size=3), resume=True)
    with pytest.raises(ValueError, match="no fine-tuning run"):
        Finetuner(config(expert_data, tiny_vlm_dir, tmp_path / "new", steps=2), resume=True)


def test_text_only_checkpoint_is_refused(expert_data, tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    LlamaForCausalLM(LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                                 num_attention_heads=1)).save_pretrained(tmp_path / "llama")
    with pytest.raises(ValueError, match=r"llama.*model type 'llama' \(architectures: LlamaForCausalLM\) is not an"):
        Finetuner(config(expert_data, tmp_path / "llama", tmp_path / "run"))


def test_checkpoint_without_chat_template_is_named_with_the_fix(expert_data, tmp_path):
    from tests.tiny_vlm import build_tiny_vlm

    model = build_tiny_vlm(tmp_path / "bare", chat_template=None)
    with pytest.raises(ValueError, match=r"no chat template.*chat_template.jinja"):
        Finetuner(config(expert_data, model, tmp_path / "run"))


def test_out_of_gpu_memory_suggests_a_batch_size(expert_data, tiny_vlm_dir, tmp_path, monkeypatch):
    finetuner = Finetuner(config(expert_data, tiny_vlm_dir, tmp_path / "run", batch_size=8, steps=1),
                          show_progress=False)

    def out_of_memory(**batch):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(finetuner.model, "forward", out_of_memory)
    with pytest.raises(ValueError, match="out of GPU memory at --batch-size 8: try --batch-size 4 --grad-accum 2"):
        finetuner.run()


def test_max_minutes_stops_after_the_step_that_reaches_it_with_a_checkpoint_and_the_model(
    expert_data, tiny_vlm_dir, tmp_path, monkeypatch
):
    run = tmp_path / "run"
    settings = {"steps": 3, "save_every": 100, "eval_every": 0}
    finetuner = Finetuner(config(expert_data, tiny_vlm_dir, run, max_minutes=0.01, **settings), show_progress=False)
    train_step = finetuner._train_step

    def slow_step():
        time.sleep(0.7)  # one step outlasts 0.01 min
        return train_step()

    monkeypatch.setattr(finetuner, "_train_step", slow_step)
    summary = finetuner.run()
    assert summary["steps"] == 1 and summary["stopped_by"] == "max_minutes" and summary["train_seconds"] >= 0.6
    state = torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=True)
    assert state["step"] == 1 and state["train_seconds"] >= 0.6
    assert (run / "model" / "config.json").is_file() and json.loads((run / "summary.json").read_text())["steps"] == 1
    assert finetuner.scheduler.get_last_lr()[0] == pytest.approx(0.0)  # the schedule ended at the limit

    again = Finetuner(config(expert_data, tiny_vlm_dir, run, max_minutes=0.01, **settings), resume=True,
                      show_progress=False)
    assert again.run()["steps"] == 1  # the time already trained counts: nothing left
    longer = Finetuner(config(expert_data, tiny_vlm_dir, run, max_minutes=5.0, **settings), resume=True,
                       show_progress=False)
    finished = longer.run()
    assert finished["steps"] == 3 and finished["stopped_by"] == "steps"


def test_several_datasets_train_as_one_set_and_the_run_records_them(expert_data, dataset_writer, tiny_vlm_dir, tmp_path):  # noqa: E501
    other = dataset_writer(tmp_path / "round1", episodes=2, steps=3, seed=1)
    run = tmp_path / "run"
    settings = config(expert_data, tiny_vlm_dir, run, steps=1, eval_every=0, eval_fraction=0.0)
    finetuner = Finetuner(replace(settings, data=(str(expert_data), str(other))), show_progress=False)
    assert len(finetuner.train) == 20 + 6 and finetuner.split["train_episodes"] == list(range(6))
    finetuner.run()
    assert json.loads((run / "config.json").read_text())["data"] == [str(expert_data), str(other)]
    assert json.loads((run / "model" / "found_rl_advisor.json").read_text())["data"] == [str(expert_data), str(other)]


def test_exported_card_records_the_training_towns_network_hashes(tiny_vlm_dir, tmp_path):
    from tests.town_datasets import Row, write_town_dataset
    from vlm_server.backends.hf_checks import ADVISOR_CARD

    rows = [Row(0, "A", "net-a"), Row(1, "B", "net-b"), Row(2, "A", "net-a")] * 2
    data = write_town_dataset(tmp_path / "data", rows)
    finetuner = Finetuner(config(data, tiny_vlm_dir, tmp_path / "run", steps=1, eval_every=0, eval_fraction=0.34),
                          show_progress=False)
    finetuner.run()
    card = json.loads((tmp_path / "run" / "model" / ADVISOR_CARD).read_text())
    expected = {e.network: e.town for e in finetuner.train}  # held-out episodes' towns are not training towns
    assert card["training_towns"] == expected and set(expected) <= {"net-a", "net-b"}


def test_default_settings_train_as_plain_answer_loss_fine_tuning(expert_data, tiny_vlm_dir, tmp_path):
    """Without the auxiliary head (the default) a run is the loop below: same losses, same weights."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    steps, rate = 4, 1e-2
    settings = config(expert_data, tiny_vlm_dir, tmp_path / "run", method="full", steps=steps, learning_rate=rate,
                      warmup_fraction=0.0, eval_every=0)
    assert settings.aux_action_weight == 0 and settings.vision_warmup_steps == 0
    finetuner = Finetuner(settings, show_progress=False)
    finetuner.run()

    model = AutoModelForImageTextToText.from_pretrained(tiny_vlm_dir, dtype=torch.float32).train()
    processor = AutoProcessor.from_pretrained(tiny_vlm_dir)
    optimizer = torch.optim.AdamW(model.parameters(), lr=rate, weight_decay=0.0)
    losses = []
    for step in range(steps):
        examples = [finetuner.train[i] for i in batch_indices(step, 2, len(finetuner.train), seed=1)]
        optimizer.param_groups[0]["lr"] = rate * 0.5 * (1.0 + math.cos(math.pi * step / steps))  # cosine, no warm-up
        loss = model(**encode_batch(processor, examples)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    assert scalars(tmp_path / "run", "losses/answer_loss") == pytest.approx(losses, rel=1e-6)
    trained = dict(model.named_parameters())
    for name, value in finetuner.checkpoint_weights().items():
        assert torch.equal(value, trained[name].detach()), name


def test_aux_head_logs_its_loss_and_learns_where_the_image_decides_the_class(
    image_decides_data, tiny_vlm_dir, tmp_path
):
    run = tmp_path / "run"
    settings = config(image_decides_data, tiny_vlm_dir, run, method="full", aux_action_weight=1.0, steps=30,
                      batch_size=8, learning_rate=1e-2, eval_every=10, eval_samples=8, save_every=100,
                      eval_fraction=0.25)
    summary = Finetuner(settings, show_progress=False).run()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == set(TAGS) | set(AUX_TAGS)
    aux = scalars(run, "losses/aux_action")
    assert aux[0] == pytest.approx(math.log(30), rel=1e-3)  # the head starts uniform over the 30 classes
    assert max(aux[-5:]) < 0.5 * aux[0], aux
    assert summary["eval_aux_action_accuracy"] == 1.0  # red or blue: the held-out episode's classes
    assert summary["eval_aux_action"] < 0.5 * math.log(30)


def test_vision_warm_up_trains_the_tower_alone_then_the_language_model_joins(expert_data, tiny_vlm_dir, tmp_path):
    finetuner = Finetuner(config(expert_data, tiny_vlm_dir, tmp_path / "run", method="full", aux_action_weight=1.0,
                                 vision_warmup_steps=2, steps=4, learning_rate=1e-2), show_progress=False)
    initial = finetuner.checkpoint_weights()
    language = [n for n in initial if not is_vision_tower_weight(n) and "multi_modal_projector" not in n]
    assert language and len(language) < len(initial)

    def changed(names):
        now = finetuner.checkpoint_weights()
        return {n for n in names if not torch.equal(now[n], initial[n])}

    for _ in range(2):
        losses, _, _ = finetuner._train_step()
        finetuner.step += 1
        assert "answer_loss" not in losses and "aux_action" in losses
    assert changed(initial) and not changed(language)
    assert not any(finetuner.trainable[n] in finetuner.optimizer.state for n in language)  # Adam never saw them
    losses, _, _ = finetuner._train_step()
    assert "answer_loss" in losses and "aux_action" in losses
    assert changed(language)


def test_the_exported_model_is_the_same_with_and_without_the_aux_head(expert_data, tiny_vlm_dir, tmp_path):
    from safetensors import safe_open

    exported = {}
    for name, settings in (("plain", {"method": "full"}), ("aux", AUX)):
        Finetuner(config(expert_data, tiny_vlm_dir, tmp_path / name, steps=2, eval_every=0, **settings),
                  show_progress=False).run()
        model_dir = tmp_path / name / "model"
        files = sorted(p.name for p in model_dir.iterdir())
        with safe_open(str(model_dir / "model.safetensors"), "pt") as weights:
            shapes = {key: tuple(weights.get_slice(key).get_shape()) for key in sorted(weights.keys())}
        exported[name] = files, shapes
        advisor = HuggingFaceAdvisor(model_path=str(model_dir))
        advisor.load()  # serves as it is
    assert exported["aux"] == exported["plain"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"method": "full", "aux_action_weight": -0.1}, "--aux-action-weight must be a finite number >= 0, got -0.1"),
        ({"method": "full", "aux_action_weight": math.nan}, "--aux-action-weight must be a finite number >= 0"),
        ({"method": "full", "aux_action_weight": 1.0, "vision_warmup_steps": -1}, "--vision-warmup-steps must be >= 0"),
        ({"method": "full", "vision_warmup_steps": 3}, "--vision-warmup-steps 3: only the auxiliary action loss"),
        ({"method": "full", "aux_action_weight": 1.0, "freeze_vision": True},
         "--aux-action-weight: the auxiliary loss trains the vision tower, which --freeze-vision keeps frozen"),
        ({"method": "lora", "aux_action_weight": 1.0}, "--aux-action-weight: LoRA adapts the language model only"),
    ],
)
def test_aux_settings_that_cannot_work_are_refused_naming_the_flag(overrides, message):
    with pytest.raises(ValueError, match=message):
        FinetuneConfig(data="d", model="m", out="o", **overrides)


def test_a_vision_warm_up_as_long_as_the_run_is_refused(expert_data, tiny_vlm_dir, tmp_path):
    settings = config(expert_data, tiny_vlm_dir, tmp_path / "run", method="full", aux_action_weight=1.0,
                      vision_warmup_steps=3, steps=3)
    with pytest.raises(ValueError, match="--vision-warmup-steps 3: the run has 3 steps"):
        Finetuner(settings, show_progress=False)

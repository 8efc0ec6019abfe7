"""Open-loop evaluation of a VLM advisor on held-out expert episodes, through the server's own backend.

The answers come from ``vlm_server``'s ``HuggingFaceAdvisor`` (the same prompt, processor,
left padding, greedy decoding and parser the server uses), so the scores describe the advisor
as it will be served, not a training-time approximation of it. One difference: evaluation
decodes with plain greedy ``generate`` even where the server uses templated decoding, because
templated answers always parse and the parse rate is meant to say whether the model has
learnt to write the answer; wherever greedy writes it, both give the same answer.

Beside the model, the report scores two image-blind baselines (``found_rl.vlm.baselines``)
fitted on the model's training samples (or cross-fitted on the evaluated ones when those are
unknown), breaks every number down per command and, where the dataset records towns, per
town, and lists the evaluated road networks the training data also covers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from found_rl.dataset.town_overlap import networks_of, town_name, towns_overlap
from found_rl.vlm.baselines import BaselineAnswer, PromptContext, cross_fitted_answers, fit_baselines
from found_rl.vlm.examples import ChatExample
from found_rl.vlm.scoring import command_name, score_report
from found_rl.vlm.training_data import TrainingData


def advise(
    examples: Sequence[ChatExample],
    model_path: str,
    *,
    batch_size: int = 16,
    device: str = "cpu",
    dtype: str = "auto",
    max_new_tokens: int = 32,
    trust_remote_code: bool = False,
    show_progress: bool = True,
) -> list[tuple[tuple[float, float] | None, str | None]]:
    """``(action or None, answer text)`` for every example, in order."""
    from tqdm import tqdm

    from found_rl.errors import as_user_error
    from vlm_server.backends.base import AdviseItem
    from vlm_server.backends.hf_checks import check_image_text_to_text
    from vlm_server.backends.hf_vlm import HuggingFaceAdvisor

    with as_user_error():  # --model is no chat model that takes images
        check_image_text_to_text(model_path, trust_remote_code)
    advisor = HuggingFaceAdvisor(
        model_path=model_path,
        device=device,
        dtype=dtype,
        max_new_tokens=max_new_tokens,
        trust_remote_code=trust_remote_code,
        templated_decoding=False,  # the parse rate scores the model's own writing (module docstring)
    )
    advisor.load()
    answers: list[tuple[tuple[float, float] | None, str | None]] = []
    with tqdm(total=len(examples), unit="sample", desc="evaluate", disable=not show_progress) as bar:
        for start in range(0, len(examples), batch_size):
            chunk = examples[start : start + batch_size]
            items = [AdviseItem(e.key, e.image(), e.command, e.speed_mps, e.state) for e in chunk]
            answers.extend((r.action, r.text) for r in advisor.advise_batch(items))
            bar.update(len(chunk))
    return answers


def context_of(sample: Any) -> PromptContext:
    """The prompt's inputs of a ``ChatExample`` or ``SampleMeta``."""
    return PromptContext(sample.command, sample.speed_mps, sample.target_ego)


def baseline_answers(
    examples: Sequence[ChatExample], training: TrainingData, seed: int = 0
) -> tuple[dict[str, list[BaselineAnswer]], str]:
    """Each baseline's answer to every example, and what the baselines were fitted on."""
    if training.samples:
        fitted = fit_baselines([context_of(s) for s in training.samples], [s.action for s in training.samples])
        contexts = [context_of(e) for e in examples]
        return {name: [b.answer(c) for c in contexts] for name, b in fitted.items()}, training.description
    answers, is_cross_fitted = cross_fitted_answers(
        [context_of(e) for e in examples], [e.action for e in examples], [e.episode for e in examples], seed
    )
    how = "two halves of its episodes, each answered by the other" if is_cross_fitted else "all of it (one episode)"
    return answers, f"the evaluated samples, {how} (training data {training.description})"


def report_of(
    examples: Sequence[ChatExample],
    predicted: Sequence[tuple[float, float] | None],
    training: TrainingData,
    seed: int = 0,
) -> dict[str, Any]:
    """Scores of ``predicted`` and of the baselines; per command, per town, and the training towns' overlap.

    ``towns_overlap_training`` lists the evaluated road networks the training data covers
    (``found_rl.dataset.town_overlap``); it is None when either side's networks are unknown.
    """
    baselines, fitted_on = baseline_answers(examples, training, seed)
    breakdowns = {"per_command": [command_name(e.command) for e in examples]}
    has_towns = any(e.town is not None or e.network is not None for e in examples)
    if has_towns:
        breakdowns["per_town"] = [town_name(e) for e in examples]
    report = score_report([e.action for e in examples], predicted, breakdowns, baselines)
    report["baselines_fitted_on"] = fitted_on
    evaluated = networks_of(examples)
    is_known = bool(evaluated) and training.networks is not None
    report["towns_overlap_training"] = towns_overlap(evaluated, training.networks) if is_known else None
    return report


def evaluate(
    examples: Sequence[ChatExample], model_path: str, training: TrainingData | None = None, **options: Any
) -> dict[str, Any]:
    """``report_of`` the advisor at ``model_path`` on ``examples`` (see ``found_rl.vlm.scoring``);
    without ``training`` the baselines are fitted on ``examples`` themselves."""
    answers = advise(examples, model_path, **options)
    training = training or TrainingData(None, "unknown (not given)", None)
    return report_of(examples, [action for action, _ in answers], training)

"""Open-loop evaluation of a VLM advisor on held-out expert episodes, through the server's own backend.

The answers come from ``vlm_server``'s ``HuggingFaceAdvisor`` (the same prompt, processor,
left padding, greedy decoding and parser the server uses), so the scores describe the advisor
as it will be served, not a training-time approximation of it. One difference: evaluation
decodes with plain greedy ``generate`` even where the server uses templated decoding, because
templated answers always parse and the parse rate is meant to say whether the model has
learnt to write the answer; wherever greedy writes it, both give the same answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from found_rl.vlm.examples import ChatExample
from found_rl.vlm.scoring import score_by_command


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


def evaluate(examples: Sequence[ChatExample], model_path: str, **options: Any) -> dict[str, Any]:
    """Scores of the advisor at ``model_path`` on ``examples`` (see ``found_rl.vlm.scoring``)."""
    answers = advise(examples, model_path, **options)
    return score_by_command(
        [e.command for e in examples], [e.action for e in examples], [action for action, _ in answers]
    )

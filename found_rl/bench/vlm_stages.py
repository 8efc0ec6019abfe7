"""Where an HF advisor answer's time goes, in process: ``python -m found_rl.bench.vlm_stages --model DIR``.

Times each stage of ``HuggingFaceAdvisor.advise_batch`` on the same 192 px BEV batch, both ways
the backend can run: the processor and greedy ``generate`` (what every checkpoint did before
the fast paths, and still does where they do not apply), and the fast inputs with templated
decoding. Every request has its own prompt, as in training. Milliseconds per batch; the last
rows are the whole ``advise_batch`` and answers/s. Used for the table in docs/vlm.md.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

BATCH_SIZES = (1, 4, 32)


def bev_items(count: int, seed: int = 0) -> list[Any]:
    """``count`` advise items with blocky random 192 px BEVs and distinct prompts."""
    from vlm_server.backends.base import AdviseItem

    rng = np.random.default_rng(seed)
    items = []
    for index in range(count):
        cells = rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)
        target = {"target_ego_xy": [round(float(rng.uniform(2, 10)), 2), round(float(rng.uniform(-2, 2)), 2)]}
        items.append(AdviseItem(str(index), np.repeat(np.repeat(cells, 8, 0), 8, 1), 1 + index % 4,
                                round(float(rng.uniform(0, 12)), 1), target))
    return items


def mean_ms(function: Callable[[], Any], repeats: int) -> float:
    """Mean wall time of ``function`` over ``repeats`` calls after one warm-up call, ms."""
    function()
    start = time.perf_counter()
    for _ in range(repeats):
        function()
    return 1e3 * (time.perf_counter() - start) / repeats


def processor_stages(advisor: Any, items: list[Any], repeats: int) -> dict[str, float]:
    """The processor-and-generate path, stage by stage (``advisor`` has neither fast path)."""
    import torch
    from PIL import Image

    from vlm_server.answers import parse_answer
    from vlm_server.backends.hf_vlm import chat_prompt_text, item_prompt

    processor = advisor.processor
    texts = [chat_prompt_text(processor, item_prompt(item)) for item in items]
    images = [Image.fromarray(np.asarray(item.image)) for item in items]
    inputs = processor(text=texts, images=images, return_tensors="pt", padding=True)

    def generate(tokens: int) -> Any:
        with torch.inference_mode():
            return advisor.model.generate(**inputs, max_new_tokens=tokens, do_sample=False)

    output = generate(advisor.max_new_tokens)
    new_tokens = output[:, inputs["input_ids"].shape[1]:]
    answers = processor.batch_decode(new_tokens, skip_special_tokens=True)
    stages = {
        "chat template": mean_ms(lambda: [chat_prompt_text(processor, item_prompt(i)) for i in items], repeats),
        "images (PIL + processor)": mean_ms(
            lambda: processor.image_processor([Image.fromarray(np.asarray(i.image)) for i in items],
                                              return_tensors="pt"), repeats),
    }
    whole = mean_ms(lambda: processor(text=texts, images=images, return_tensors="pt", padding=True), repeats)
    stages["token ids + padding"] = whole - mean_ms(lambda: processor.image_processor(images, return_tensors="pt"),
                                                    repeats)
    prefill = mean_ms(lambda: generate(1), repeats)
    total = mean_ms(lambda: generate(advisor.max_new_tokens), repeats)
    stages["model: prefill (vision + prompt)"] = prefill
    stages["model: later tokens"] = total - prefill
    stages["model: all calls"] = total
    stages["model calls"] = new_tokens.shape[1]
    stages["decode"] = mean_ms(lambda: processor.batch_decode(new_tokens, skip_special_tokens=True), repeats)
    stages["parse"] = mean_ms(lambda: [parse_answer(a) for a in answers], repeats)
    return stages


def fast_stages(advisor: Any, items: list[Any], repeats: int) -> dict[str, float]:
    """The fast inputs and templated decoding, stage by stage (``advisor`` has both)."""
    import torch

    from vlm_server.answers import parse_answer
    from vlm_server.backends.hf_vlm import item_prompt

    prompt_ids, pixels = advisor.fast_inputs
    prompts = [item_prompt(item) for item in items]

    def ids_uncached() -> Any:
        prompt_ids.clear()
        return prompt_ids.batch(prompts)

    inputs = advisor.model_inputs(items)

    def decode_answer() -> Any:
        with torch.inference_mode():
            return advisor.decoder(inputs)

    calls_before = advisor.decoder.calls
    tokens = decode_answer()
    calls = advisor.decoder.calls - calls_before
    answers = advisor.processor.batch_decode(tokens, skip_special_tokens=True)
    return {
        "chat template": 0.0,  # rendered once at load, around the prompt
        "images (PIL + processor)": mean_ms(lambda: pixels(np.stack([np.asarray(i.image) for i in items])), repeats),
        "token ids + padding": mean_ms(ids_uncached, repeats),  # every prompt new, as in training
        "token ids + padding, cached prompts": mean_ms(lambda: prompt_ids.batch(prompts), repeats),
        "model: all calls": mean_ms(decode_answer, repeats),
        "model calls": calls,
        "decode": mean_ms(lambda: advisor.processor.batch_decode(tokens, skip_special_tokens=True), repeats),
        "parse": mean_ms(lambda: [parse_answer(a) for a in answers], repeats),
    }


def measure(model: str, threads: int, max_new_tokens: int) -> dict[int, dict[str, dict[str, float]]]:
    """``{batch: {"before": stages, "after": stages}}`` with whole-call timings and answers/s."""
    from vlm_server.backends.hf_vlm import HuggingFaceAdvisor

    before = HuggingFaceAdvisor(model_path=model, max_new_tokens=max_new_tokens, torch_threads=threads,
                                fast_inputs=False, templated_decoding=False)
    after = HuggingFaceAdvisor(model_path=model, max_new_tokens=max_new_tokens, torch_threads=threads)
    before.load()
    after.load()
    if after.fast_inputs is None or after.decoder is None:
        raise SystemExit(f"{model}: the fast paths do not apply to this model (not a `found-rl vlm init` one)")
    report = {}
    for batch in BATCH_SIZES:
        items = bev_items(batch)
        repeats = max(3, 64 // batch)
        rows = {"before": processor_stages(before, items, repeats), "after": fast_stages(after, items, repeats)}
        for name, advisor in (("before", before), ("after", after)):
            whole = mean_ms(lambda advisor=advisor, items=items: advisor.advise_batch(items), repeats)
            rows[name]["advise_batch"] = whole
            rows[name]["answers/s"] = 1e3 * batch / whole
        report[batch] = rows
    return report


def table(report: dict[int, dict[str, dict[str, float]]], threads: int) -> str:
    """Markdown: a row per stage, a before and an after column per batch size."""
    stages = list(dict.fromkeys([*report[BATCH_SIZES[0]]["before"], *report[BATCH_SIZES[0]]["after"]]))
    head = "| stage (ms per batch) | " + " | ".join(f"b{b} before | b{b} after" for b in report) + " |"
    lines = [f"torch threads {threads}, load average {os.getloadavg()[0]:.2f}", "", head,
             "|---|" + "---:|" * (2 * len(report))]
    for stage in stages:
        cells = []
        for rows in report.values():
            cells += [_cell(rows["before"].get(stage)), _cell(rows["after"].get(stage))]
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if value >= 100 or float(value).is_integer() else f"{value:.1f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a `found-rl vlm init` model folder (trained or not)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--max-new-tokens", type=int, default=16, help="generate's budget (the before path)")
    args = parser.parse_args(argv)
    from found_rl.vlm.hf_logging import quiet_transformers

    quiet_transformers()
    print(table(measure(args.model, args.threads, args.max_new_tokens), args.threads))


if __name__ == "__main__":
    main()

"""``found-rl bench ...``: each benchmark lives in ``found_rl.bench.<name>``.

Every benchmark prints a table whose ratios are measured side by side in one run, and with
``--json`` one JSON object instead (for scripts and ``docs/benchmarks.md``).
"""

from __future__ import annotations

import argparse
import importlib

BENCHMARKS: dict[str, str] = {
    "sim": "env-steps/s of the SUMO DrivingEnv with and without BEV, reset time, memory (--backend-only: SUMO alone)",
    "bev": "BEV renderer alone: ms per render on synthetic scenes of growing density",
    "sampler": "FAST vs single-clip and lock-step baselines: wall-clock per 10k valid transitions",
    "server": "advisor server throughput, batching speed-up, latency, lost/duplicated replies",
    "learners": "SAC and DrQ-v2 on Pendulum-v1, PPO on CartPole-v1 reference parity; FAST vs single-clip PPO wall time",
    "policy": "FLOPs, inference frames/s and SAC updates/s of a driving network preset",
    "train": "the whole training loop, advisor off vs served expert advisor, side by side",
    "guidance": "learning curves over seeds: plain SAC vs VMR+AWAG with the expert vs a noisy advisor",
    "vlm": "VLM advisor fine-tuning tokens/s and samples/s; served requests/s at batch 1 and 32",
    "clip": "images/s of the served CLIP scorer at batch 1 and 32 (a fine-tuned checkpoint or random weights)",
}


def configure(parser: argparse.ArgumentParser) -> None:
    subparsers = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    for name, help_text in BENCHMARKS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
        importlib.import_module(f"found_rl.bench.{name}").configure(sub)

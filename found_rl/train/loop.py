"""The training loop: FAST collection, the advisor label path, updates, evaluation, checkpoints.

One lock-step k of the loop, overlapped (``sampler.overlap``, the default for SAC and DrQ-v2)::

    sampler.step_async()      N clips act on o_k with one batched policy call; the workers step
    learner.update(...) × j   meanwhile: the updates paid by lock-steps up to k − 1
    sampler.step_wait()       the workers' results: lock-step k's transitions
    replay.add(...)           valid transitions only (FAST padding is never stored)
    advisor.submit(...)       a request about o_t for each transition in the label budget
    advisor.collect(...)      answers due now are attached to o_t's replay entry by step id
    evaluate / checkpoint     at their env-step marks (checkpoints at FAST round boundaries)

The policy that acts on o_k is the one before lock-step k − 1's updates: one update round of
policy lag, which an off-policy learner does not mind (docs/method.md §8), and no thread is
involved, so the order of every random draw, and hence the run, does not depend on timing.
Without overlap (PPO, or ``sampler.overlap: false``) the lock-step is ``sampler.step()``, then
storing, then the updates.

The parts live beside it: the learner and its storage are built in :mod:`learners`, the two
storage kinds collect and update in :mod:`collection` (one collector, chosen at start-up), and
:mod:`telemetry` writes every TensorBoard tag. Learners never import this package (STYLE §6):
they see replay batches and return logs.
"""

from __future__ import annotations

import functools
import logging
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fast_sampler import FastSampler, StepBatch, make_executor
from found_rl.checkpoint import save_checkpoint
from found_rl.devices import resolve_device
from found_rl.models.encoders import PRESET_BEV_POOL
from found_rl.models.observation import obs_spec_from_space
from found_rl.train.checkpointing import (
    load_run_checkpoint,
    restore_rng_states,
    rng_states,
    save_run_checkpoint,
)
from found_rl.train.collection import Counters, OffPolicyCollector, OnPolicyCollector, make_collector
from found_rl.train.config import RunConfig
from found_rl.train.envs import AdviceState, make_training_env
from found_rl.train.evaluation_queue import EvaluationQueue, PendingEvaluation
from found_rl.train.evaluation_sets import (
    NO_EVALUATION,
    EvaluationPlan,
    EvaluationSet,
    EvaluationSets,
    plan_evaluation_sets,
)
from found_rl.train.labels import AdvisorLink, ChosenBudget
from found_rl.train.learners import build_learner, network_name
from found_rl.train.resources import Placement, pin_learner, placed, server_threads, split_cpus, usable_cores
from found_rl.train.run_folder import RunFolder, append_jsonl, read_jsonl, truncate_jsonl
from found_rl.train.server import SpawnedServer
from found_rl.train.stopping import Interrupted, StopRequests
from found_rl.train.telemetry import Telemetry, Timers

__all__ = ["Counters", "Interrupted", "Timers", "TrainResult", "Trainer", "resolve_device", "torch_threads",
           "usable_cores"]

log = logging.getLogger(__name__)

ACTION_DIM = 2


def torch_threads(asked: int) -> int:
    """The learner's torch threads: ``asked``, at most the usable cores (0: one less than them).

    More threads than cores only spin against each other (issue 10: two threads on two busy
    cores ran 14× slower than one), so a larger ``torch_threads`` is capped, with a warning.
    """
    cores = usable_cores()
    if asked > cores:
        log.warning("torch_threads: %d asked for, but this process may use %d cores; using %d", asked, cores, cores)
        return cores
    return asked or max(1, cores - 1)


@dataclass(frozen=True)
class TrainResult:
    """What a finished (or interrupted) run reports."""

    run_dir: Path
    env_steps: int
    updates: int
    wall_s: float
    env_steps_per_s: float
    updates_per_s: float
    shares: dict[str, float]
    last_evaluation: dict[str, Any] | None
    interrupted: bool
    label_coverage: float
    evaluation_sets: tuple[EvaluationSet, ...] = ()
    learning_env_steps_per_s: float = 0.0
    """env steps/s from this session's first update on (the random-action warm-up left out)"""
    learning_updates_per_s: float = 0.0
    labels: dict[str, Any] | None = None
    """the label path's :meth:`~found_rl.train.labels.AdvisorLink.summary`, its ``repeatable`` and
    ``not_repeatable_from`` included (``None`` without an advisor)"""
    finished: bool = False
    """the loop ended because the budget was used up (``finished.json`` is in the run folder)"""


@dataclass(frozen=True)
class AdviceWants:
    """What a run asks its advisor for, and what each request about an observation carries."""

    actions: bool
    """advisor actions (VMR, AWAG)"""
    clip: bool
    """CLIP bonuses"""
    image: bool
    """the RGB BEV (a VLM or CLIP reads it)"""
    state: AdviceState
    """``"expert"``: the privileged state; ``"prompt"``: only the prompt's fields; ``None``: none"""


class Trainer:
    """Trains a policy as ``config`` says, into ``run_dir``.

    Args:
        config: the validated run config.
        run_dir: the run folder (created, or resumed when ``resume``).
        resume: continue the run in ``run_dir`` from its checkpoint.
        show_progress: draw a progress bar (tqdm) on stderr.
    """

    def __init__(self, config: RunConfig, run_dir: Path, *, resume: bool = False, show_progress: bool = True):
        self.folder = RunFolder(Path(run_dir))
        self.config = self.folder.resumed_config(config) if resume else config
        self.resume = resume
        self.show_progress = show_progress
        self.counters = Counters()
        self.telemetry = Telemetry(config.sampler.clips)
        self.timers = self.telemetry.timers
        self.device = resolve_device(config.device, source="device:")
        self.preset = network_name(config, self.device)
        self.warmup_rng = np.random.default_rng([config.seed, 1])
        self.sample_rng = np.random.default_rng([config.seed, 2])
        self.last_evaluation: dict[str, Any] | None = None
        self._evaluated_at = -1
        self.stop = StopRequests()
        self.evaluations: EvaluationQueue | None = None

    @property
    def learner(self) -> Any:
        return self.collector.learner

    def _wants(self) -> AdviceWants:
        """What the run asks the advisor for, and what its requests carry.

        Only the privileged expert (``spawn: expert``, or ``urls`` with ``send_image: false``)
        gets the expert's state; any other advisor (a VLM, an OpenAI-compatible upstream) reads
        the image and the prompt's fields alone.
        """
        advisor, guidance = self.config.advisor, self.config.guidance
        want_actions = advisor.enabled and guidance.needs_advice
        want_clip = advisor.enabled and guidance.clip_bonus.enabled
        privileged = advisor.spawn == "expert" or bool(advisor.urls and not advisor.send_image)
        image_for_vlm = want_actions and not privileged
        state: AdviceState = None
        if want_actions:
            state = "expert" if privileged else "prompt"
        return AdviceWants(want_actions, want_clip, want_clip or image_for_vlm, state)

    # ------------------------------------------------------------------ the run
    def run(self) -> TrainResult:
        # Spare a core for the env workers and the advisor: torch's thread pool spin-waits, and
        # two threads on two busy cores ran 14× slower than one (issue 10).
        threads = torch_threads(self.config.torch_threads)
        torch.set_num_threads(threads)
        torch.manual_seed(self.config.seed)
        with ExitStack() as stack:
            return self._run(stack)

    def _run(self, stack: ExitStack) -> TrainResult:
        config, folder = self.config, self.folder
        if self.resume:
            state = load_run_checkpoint(folder.checkpoint)
            folder.finished.unlink(missing_ok=True)  # finished again only when this session uses up the budget
            folder.update_config(config)
        else:
            state = None
            folder.create(config)
        plan = plan_evaluation_sets(config, folder.eval_routes) if config.evaluation.enabled else NO_EVALUATION
        if plan.sets:
            folder.write_towns(plan.towns_record())
        wants = self._wants()
        want_actions, want_clip = wants.actions, wants.clip
        resources = config.resources
        learner_cpus, other_cpus = split_cpus(resources.learner_cpus)
        # The evaluation workers and the advisor server load (imports, maps, models) while the
        # clip workers and the learner are built; the server is waited for below, the evaluation
        # workers by the first evaluation.
        self.evaluator: EvaluationSets | None = None
        if plan.sets:
            self.evaluator = EvaluationSets(
                plan, config.evaluation.seed, PRESET_BEV_POOL[self.preset],
                placement=Placement("resources.evaluator_nice", resources.evaluator_nice, other_cpus),
            )
            stack.callback(self.evaluator.close)
        server = self._launch_server(
            stack, want_actions or want_clip, Placement("resources.server_nice", resources.server_nice, other_cpus))
        factories = self._env_factories(plan, state=wants.state, with_image=wants.image)
        if config.sampler.executor != "inprocess":  # the workers yield the CPU to the learner
            workers = Placement("resources.worker_nice", resources.worker_nice, other_cpus)
            factories = [placed(factory, workers) for factory in factories]
        executor = make_executor(factories, config.sampler.executor)
        sampler = stack.enter_context(FastSampler(
            executor, self._act, rho=config.sampler.rho, horizon=config.sampler.horizon,
            seed=config.seed, seed_every_episode=True,
        ))
        self.sampler = sampler
        built = build_learner(config, obs_spec_from_space(sampler.observation_space), self.device)
        self.collector: OffPolicyCollector | OnPolicyCollector = make_collector(
            config, built, self.counters, self.telemetry, self.device,
            warmup_rng=self.warmup_rng, sample_rng=self.sample_rng,
        )
        if self.evaluator is not None:  # its workers go on loading beside training; evaluations wait for them
            videos = folder.videos if config.evaluation.video else None
            self.evaluations = EvaluationQueue(self.evaluator, folder.references, folder.evaluations, videos,
                                               self._write_evaluation, self._waiting_for_evaluation)
        self.link = self._start_advisor(stack, want_actions, want_clip, server)
        stack.callback(self.telemetry.open(folder.root).close)
        pin_learner(learner_cpus)  # after every child started: none may inherit it

        if state is not None:
            self._restore(state)
        else:
            self.counters.next_checkpoint = config.checkpoint.every_env_steps
        interrupted = False
        try:
            with self.stop.installed():
                self._queue_references()
                self._loop()
        except Interrupted as exc:
            interrupted = True
            log.warning("interrupted (%s): writing a final checkpoint", exc)
        exact = True
        if sampler.pending:  # a second signal stopped an overlapped lock-step halfway: its rows are dropped
            sampler.step_wait()
            exact = False
        if not interrupted and self.evaluations is not None and self._evaluated_at != self.counters.env_steps:
            self._evaluate(self._final_mark())  # the final policy, driven while the checkpoints are written
        # a kill before the final row is written leaves it pending in this checkpoint: the resume drives it again
        self._checkpoint(exact=exact and sampler.at_round_boundary)
        save_checkpoint(folder.final_policy, self.learner.policy_spec, self._policy_state,
                        metadata={"env_steps": self.counters.env_steps})
        if not interrupted and self.evaluations is not None:
            self.evaluations.drain()  # the final policy's row and every reference
        result = self._result(interrupted)
        if result.finished:  # last: a run killed before this line is resumed, never taken for complete
            folder.write_finished(self._finished_record(result))
        return result

    def _env_factories(self, plan: EvaluationPlan, *, state: AdviceState, with_image: bool) -> list[Any]:
        """One env factory per clip; the clips spread over the training scenarios in turn.

        Only the first training town holds evaluation routes out (``evaluation.seen``).
        """
        scenarios = self.config.scenario
        return [
            functools.partial(
                make_training_env, str(scenarios[clip % len(scenarios)]),
                train_routes=plan.first_town_train_routes if clip % len(scenarios) == 0 else None,
                state=state, with_image=with_image, bev_pool=PRESET_BEV_POOL[self.preset],
            )
            for clip in range(self.config.sampler.clips)
        ]

    def _final_mark(self) -> int:
        """The mark of the last evaluation: the env-step budget when the run used it up."""
        budget = self.config.budget.env_steps
        steps = self.counters.env_steps
        return budget if budget is not None and steps >= budget else steps

    @property
    def _policy_state(self) -> dict[str, torch.Tensor]:
        return self.collector.policy_network.state_dict()

    def _launch_server(self, stack: ExitStack, wanted: bool, placement: Placement) -> SpawnedServer | None:
        """Start the advisor server the run spawns (``advisor.spawn``), without waiting for it."""
        advisor = self.config.advisor
        if not (wanted and advisor.spawn):
            return None
        server = SpawnedServer(
            advisor.spawn, advisor.spawn_options, advisor.clip, advisor.clip_options,
            log_path=self.folder.server_log, ready_timeout_s=advisor.ready_timeout_s,
            threads=server_threads(self.config.resources.server_threads), placement=placement,
        )
        stack.callback(server.stop)
        server.launch()
        return server

    def _start_advisor(self, stack: ExitStack, want_actions: bool, want_clip: bool,
                       server: SpawnedServer | None) -> AdvisorLink | None:
        advisor = self.config.advisor
        if not (want_actions or want_clip):
            return None
        urls = advisor.urls
        if server is not None:
            server.wait_ready()
            urls = [server.url]
            log.info("advisor server %s started (pid %s)", server.url, server.pid)
        from vlm_server.client import BackgroundClient

        client = BackgroundClient(urls, timeout_s=advisor.timeout_s, max_retries=2)
        lag = advisor.label_lag_steps if advisor.label_mode == "repeatable" else None
        link = AdvisorLink(
            client, want_actions=want_actions, want_clip=want_clip, lag_steps=lag,
            rate=None if advisor.label_rate == "auto" else advisor.label_rate,
            auto_rate_steps_per_s=advisor.auto_rate_steps_per_s, on_budget_chosen=self._record_label_budget,
            down_wait_s=advisor.down_wait_s, stop_when_down=advisor.when_down == "stop",
            advisor_name=f"the advisor at {', '.join(urls)}", check_interrupt=self.stop.check,
            request_items=advisor.request_items, cpu_share=advisor.auto_cpu_share,
            advisor_cpu_seconds=server.cpu_seconds if server is not None else None,
        )
        stack.callback(link.close)
        return link

    def _record_label_budget(self, budget: ChosenBudget) -> None:
        """``label_rate`` / ``label_lag_steps: auto`` resolved: the numbers go into config.yaml, so a
        resume repeats them; the probe's measurements into label_probe.json."""
        update: dict[str, Any] = {"label_rate": budget.rate}
        if budget.lag_steps is not None:
            update["label_lag_steps"] = budget.lag_steps
        advisor = self.config.advisor.model_copy(update=update)
        self.config = self.config.model_copy(update={"advisor": advisor})
        self.folder.update_config(self.config)
        if budget.answers_per_s is not None:
            self.folder.write_label_probe({
                "answers_per_s": budget.answers_per_s, "label_rate": budget.rate,
                "label_lag_steps": budget.lag_steps, "auto_rate_steps_per_s": advisor.auto_rate_steps_per_s,
                "answers_per_s_by_request_size": {str(size): value
                                                  for size, value in budget.answers_per_s_by_request_size.items()},
                "per": "second of the spawned server's CPU time" if advisor.spawn else "wall-clock second",
            })

    # ------------------------------------------------------------------ the loop
    def _act(self, obs: Any) -> Any:
        with self.timers.measure("policy"):
            return self.collector.act(obs)

    def _budget_left(self, session_start: float) -> bool:
        return self._budget_reached(self.counters.wall_s + time.perf_counter() - session_start) is None

    def _budget_reached(self, wall_s: float) -> str | None:
        """The budget key the run has used up (``env_steps`` or ``wall_time_s``), or ``None``."""
        budget = self.config.budget
        if budget.env_steps is not None and self.counters.env_steps >= budget.env_steps:
            return "env_steps"
        if budget.wall_time_s is not None and wall_s >= budget.wall_time_s:
            return "wall_time_s"
        return None

    def _finished_record(self, result: TrainResult) -> dict[str, Any]:
        """``finished.json``: which budget ended the run, and where it stood then."""
        budget = self.config.budget
        return {"reached": self._budget_reached(result.wall_s), "env_steps": result.env_steps,
                "updates": result.updates, "wall_s": result.wall_s,
                "budget": {"env_steps": budget.env_steps, "wall_time_s": budget.wall_time_s}}

    def _loop(self) -> None:
        from tqdm import tqdm

        config, counters, telemetry = self.config, self.counters, self.telemetry
        session_start = time.perf_counter()
        telemetry.session_start = session_start
        total = config.budget.env_steps
        with tqdm(total=total, initial=counters.env_steps, unit="step", disable=not self.show_progress,
                  dynamic_ncols=True, desc="train") as bar:
            if self.evaluations is not None and counters.env_steps >= counters.next_evaluation:
                self._evaluate(counters.next_evaluation)
            last_log = time.perf_counter()
            lockstep = self._overlapped_lockstep if config.overlaps else self._alternating_lockstep
            while self._budget_left(session_start):
                self.stop.check()
                before = counters.env_steps
                lockstep()
                telemetry.note_learning(counters)
                if self.evaluations is not None:
                    self.evaluations.poll()
                    if counters.env_steps >= counters.next_evaluation:
                        self._evaluate(counters.next_evaluation)
                if counters.env_steps >= counters.next_checkpoint and self.collector.can_checkpoint(self.sampler):
                    self._checkpoint(exact=self.sampler.at_round_boundary)
                bar.update(counters.env_steps - before)
                if time.perf_counter() - last_log >= 2.0:
                    last_log = time.perf_counter()
                    bar.set_postfix_str(telemetry.progress_text(counters, self.link, self._label_coverage,
                                                                self.last_evaluation), refresh=False)
                    telemetry.log_perf(counters, self.sampler.stats.valid_fraction, self.link, self._label_coverage)

    def _alternating_lockstep(self) -> None:
        """Step, store, then update: the learner waits for the workers and the other way round."""
        with self.timers.measure("sampling"):
            batch = self.sampler.step()
        self._store(batch)
        self.telemetry.log_episodes(batch, self.counters)
        self.collector.update(self.link)

    def _overlapped_lockstep(self) -> None:
        """Act and send, update while the workers step, then store (one update round of policy lag)."""
        with self.timers.measure("sampling"):
            self.sampler.step_async()
        self.collector.update(self.link)  # paid by the lock-steps stored so far
        with self.timers.measure("sampling"):
            batch = self.sampler.step_wait()
        self._store(batch)
        self.telemetry.log_episodes(batch, self.counters)

    def _store(self, batch: StepBatch) -> None:
        """The lock-step into the learner's storage, then its requests to the advisor and the answers back."""
        step_ids = np.stack([batch.clip_index, batch.episode_index, batch.step_index], axis=1)
        self.collector.store(batch, step_ids)
        self.counters.env_steps += int(batch.valid.sum())
        self.counters.lock_steps += 1
        if self.link is None:
            return
        with self.timers.measure("advisor"):
            self.link.submit_lockstep(batch, self.counters.env_steps, self.counters.lock_steps)
            self.link.collect(self.collector.attach, self.counters.env_steps, self.counters.lock_steps)

    def _label_coverage(self) -> float:
        return self.collector.label_coverage(self.link)

    # ------------------------------------------------------------------ evaluation
    def _queue_references(self) -> None:
        """The reference policies not scored yet (a resumed run keeps its ``references.json``) run
        beside training, between the policy's evaluations, or here at once without
        ``evaluation.background``."""
        if self.evaluations is None:
            return
        self.evaluations.queue_references(self.config.evaluation.references)
        if not self.config.evaluation.background:
            self.evaluations.drain()

    @property
    def references(self) -> dict[str, dict[str, Any]]:
        """The reference policies' scores so far (``references.json``)."""
        return {} if self.evaluations is None else self.evaluations.references

    def _evaluate(self, mark: int) -> None:
        """Evaluate a snapshot of the current policy; ``mark`` is the env step the evaluation was
        due at (the curves of several seeds align on it, whatever env-step count each run had
        reached). Training goes on while the workers drive (``evaluation.background``); it waits
        only when two earlier marks are still outstanding (``evaluation_queue.MAX_OUTSTANDING``)."""
        counters = self.counters
        step = counters.env_steps
        self._evaluated_at = step
        snapshot = self.folder.eval_policy(step)
        save_checkpoint(snapshot, self.learner.policy_spec, self._policy_state, metadata={"env_steps": step})
        row = {"mark": mark, "env_steps": step, "updates": counters.updates,
               "wall_s": counters.wall_s + time.perf_counter() - self.telemetry.session_start}
        if self.link is not None:
            summary = self.link.summary()
            row["label_coverage"] = self._label_coverage()
            row["label_latency_steps"] = self.link.stats.mean_latency
            row.update({key: summary[key] for key in ("label_rate", "budget_coverage", "repeatable",
                                                      "not_repeatable_from")})
        self.evaluations.submit(PendingEvaluation(row, str(snapshot)))
        every = self.config.evaluation.every_env_steps
        counters.next_evaluation = (step // every + 1) * every
        if not self.config.evaluation.background:
            self.evaluations.finish_policy()

    def _outstanding_evaluations(self) -> list[dict[str, Any]]:
        """The policy evaluations running or waiting, as a checkpoint keeps them: each snapshot by
        its path inside the run folder, so a moved run folder resumes. Which marks are still
        outstanding depends on the workers' pace, not the seed; a resume drives them again."""
        pending = [] if self.evaluations is None else self.evaluations.outstanding_policies
        root = self.folder.root

        def stored(snapshot: str) -> str:
            path = Path(snapshot)
            return str(path.relative_to(root)) if path.is_relative_to(root) else snapshot

        return [{"row": item.row, "snapshot": stored(item.snapshot)} for item in pending]

    def _waiting_for_evaluation(self) -> ExitStack:
        """Around every wait for the evaluation workers: a safe point for Ctrl-C, timed."""
        stack = ExitStack()
        stack.enter_context(self.stop.at_once())
        stack.enter_context(self.timers.measure("evaluation"))
        return stack

    def _write_evaluation(self, row: dict[str, Any]) -> None:
        """A policy evaluation's finished row: into evaluations.jsonl, TensorBoard and the console."""
        append_jsonl(self.folder.evaluations_jsonl, row)
        self.last_evaluation = row
        self.telemetry.log_evaluation(row, row["env_steps"])
        if self.show_progress:
            from found_rl.train.report import print_evaluation

            print_evaluation(row, self.references)

    # ------------------------------------------------------------------ checkpoints
    def _checkpoint(self, *, exact: bool) -> None:
        counters, telemetry = self.counters, self.telemetry
        every = self.config.checkpoint.every_env_steps
        counters.next_checkpoint = (counters.env_steps // every + 1) * every  # saved: a resume keeps the schedule
        with self.timers.measure("checkpoint"):
            counters_state = dict(counters.__dict__)
            counters_state["wall_s"] = counters.wall_s + time.perf_counter() - telemetry.session_start
            training_state = {
                "learner": self.learner.state_dict(),
                "sampler": self.sampler.state_dict(),
                "counters": counters_state,
                "credited_steps": self.collector.credited_steps,
                "rng": rng_states({"warmup": self.warmup_rng, "sample": self.sample_rng}),
                "labels": None if self.link is None else self.link.state_dict(),
                "returns": telemetry.returns.tolist(),
                "lengths": telemetry.lengths.tolist(),
                "exact": exact,
                "config": self.config.to_yaml_dict(),
                "pending_evaluations": self._outstanding_evaluations(),
            }
            replay = self.collector.replay if self.config.checkpoint.save_replay else None
            save_run_checkpoint(self.folder.checkpoint, self.learner.policy_spec, self._policy_state,
                                training_state, replay, counters.env_steps)

    def _restore(self, state: dict[str, Any]) -> None:
        telemetry, replay = self.telemetry, self.collector.replay
        self.learner.load_state_dict(state["learner"])
        self.sampler.load_state_dict(state["sampler"])
        for key, value in state["counters"].items():
            setattr(self.counters, key, value)
        self.collector.credited_steps = int(state["credited_steps"])
        restore_rng_states(state["rng"], {"warmup": self.warmup_rng, "sample": self.sample_rng})
        if self.link is not None and state.get("labels") is not None:
            self.link.load_state_dict(state["labels"])
        if "returns" in state:
            telemetry.returns[:] = state["returns"]
            telemetry.lengths[:] = state["lengths"]
        if state.get("replay_file") and replay is not None:
            replay.load(self.folder.checkpoints / state["replay_file"])
        truncate_jsonl(self.folder.evaluations_jsonl, self.counters.env_steps)
        evaluations = read_jsonl(self.folder.evaluations_jsonl)
        self.last_evaluation = evaluations[-1] if evaluations else None
        # killed while they ran: driven again (older checkpoints kept one, by an absolute path)
        pending = state.get("pending_evaluations") or [p for p in [state.get("pending_evaluation")] if p]
        done = {row.get("mark") for row in evaluations}
        for item in pending:
            if self.evaluations is not None and item["row"]["mark"] not in done:
                self._evaluated_at = item["row"]["env_steps"]
                snapshot = self.folder.root / item["snapshot"]  # relative to the run folder
                self.evaluations.submit(PendingEvaluation(item["row"], str(snapshot)))
        telemetry.first_step = self.counters.env_steps
        telemetry.first_update = self.counters.updates
        if not state.get("exact", True):
            log.warning("the checkpoint was taken inside a round: the resumed run starts fresh episodes there")

    def _result(self, interrupted: bool) -> TrainResult:
        counters, telemetry = self.counters, self.telemetry
        elapsed = telemetry.elapsed()
        learning_steps, learning_updates = telemetry.learning_rates(counters)
        return TrainResult(
            run_dir=self.folder.root,
            env_steps=counters.env_steps,
            updates=counters.updates,
            wall_s=counters.wall_s + elapsed,
            env_steps_per_s=telemetry.session_steps(counters.env_steps) / elapsed,
            updates_per_s=telemetry.session_updates(counters.updates) / elapsed,
            shares=telemetry.shares(),
            last_evaluation=self.last_evaluation,
            interrupted=interrupted,
            label_coverage=self._label_coverage(),
            evaluation_sets=self.evaluator.plan.sets if self.evaluator is not None else (),
            learning_env_steps_per_s=learning_steps,
            learning_updates_per_s=learning_updates,
            labels=None if self.link is None else self.link.summary(),
            finished=not interrupted and self._budget_reached(counters.wall_s + elapsed) is not None,
        )

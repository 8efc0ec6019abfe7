"""Run configs of ``found-rl train``: one validated YAML that says everything a run depends on.

A run config names a scenario and how to learn on it. ``found-rl train FILE`` also takes a bare
scenario file and trains it with :func:`default_run_config`. ``--set key=value`` edits any field
by its dotted path before validation, so a mistyped key is refused like one in the file. The
resolved config (every default filled in, paths absolute) is written into the run folder, and
``--resume`` compares against it.

Example::

    scenario: quickstart.yaml
    algorithm: sac
    network: cpu
    advisor: {spawn: expert}
    guidance: {vmr: {enabled: true}, awag: {enabled: true, coef: 2.5, loss: mode_mse}}   # off unless enabled
    budget: {env_steps: 30000}

The guidance settings are ``found_rl.guidance_settings``'s, handed to the learner as they are;
which learner accepts which term, and which storage it needs, is its entry in
``found_rl.algos.registry``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from found_rl.algos.registry import learner_entry
from found_rl.errors import MissingPathError, UserError
from found_rl.guidance_settings import FiniteFloat, Guidance, GuidanceTerm
from found_rl.scenario import format_field_error, is_run_config_data, yaml_problem
from found_rl.train.label_budget import check_rate

REFERENCE_AGENTS = ("still", "throttle", "expert")
RESUMABLE_CHANGES = ("budget.",)
"""Keys a resumed run may change: a run can be given more steps or time, nothing else."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BudgetConfig(_Strict):
    """When the run stops: whichever limit comes first (at least one must be set)."""

    env_steps: int | None = Field(30_000, ge=1, description="env steps over all clips")
    wall_time_s: FiniteFloat | None = Field(None, gt=0, description="seconds of wall time")

    @model_validator(mode="after")
    def _one_limit(self) -> BudgetConfig:
        if self.env_steps is None and self.wall_time_s is None:
            raise ValueError("give env_steps or wall_time_s (or both)")
        return self


class SamplerConfig(_Strict):
    """FAST sampling (METHOD §4)."""

    clips: int = Field(4, ge=1, le=256, description="N clips stepped in lock-step")
    executor: Literal["inprocess", "process", "ray"] = "process"
    rho: FiniteFloat = Field(0.5, gt=0, le=1, description="ended fraction that triggers global truncation")
    horizon: int = Field(1000, ge=1, description="T_max: lock-steps before an episode is truncated")
    overlap: bool | None = Field(
        None, description="run the updates while the clips step (one update of policy lag; off-policy learners "
        "only); default: on for sac and drqv2, off for ppo",
    )

    @model_validator(mode="after")
    def _one_simulator_per_process(self) -> SamplerConfig:
        # libsumo runs one simulation per process: several in-process clips would share it.
        if self.executor == "inprocess" and self.clips > 1:
            raise ValueError(
                f"executor 'inprocess' runs every clip in this process, but SUMO allows one simulation per "
                f"process; use executor 'process' for clips={self.clips}"
            )
        return self


class LearnerConfig(_Strict):
    """Learner settings; SAC's follow CleanRL, PPO's follow METHOD §4 (SMPO)."""

    batch_size: int = Field(128, ge=1)
    gamma: FiniteFloat = Field(0.99, ge=0, le=1)
    policy_lr: FiniteFloat = Field(3e-4, gt=0)
    q_lr: FiniteFloat = Field(1e-3, gt=0, description="SAC critic learning rate")
    tau: FiniteFloat = Field(0.005, gt=0, le=1)
    alpha: FiniteFloat = Field(0.2, gt=0, description="SAC entropy coefficient (initial when autotuned)")
    autotune: bool = True
    drq_pad_px: int = Field(0, ge=0, description="random-shift augmentation in px (0 = off)")
    target_features: Literal["online_encoder", "target_encoder"] = Field(
        "online_encoder", description="SAC: what the target critics read of o_{t+1}: the online encoder's "
        "no-grad features (DrQ-v2's form, one encoder pass fewer) or the Polyak-averaged target encoder's",
    )
    updates_per_step: FiniteFloat = Field(
        0.25, gt=0, description="gradient updates per env step (update-to-data ratio; SAC)"
    )
    learning_starts: int = Field(2000, ge=1, description="env steps of uniform random actions before learning")
    replay_capacity: int = Field(50_000, ge=64, description="observation slots of the replay buffer")
    rollout_steps: int = Field(128, ge=1, description="PPO: lock-steps per rollout")
    update_epochs: int = Field(4, ge=1, description="PPO: epochs per rollout")
    num_minibatches: int = Field(4, ge=1, description="PPO: minibatches per epoch")


def _label_rate(value: Any) -> Any:
    """``auto`` or a number in (0, 1]."""
    if value == "auto":
        return value
    return check_rate(value, None)


LabelRate = Annotated[float | Literal["auto"], BeforeValidator(_label_rate)]


def _label_lag(value: Any) -> Any:
    """``auto`` or a whole number of lock-steps >= 0."""
    if value == "auto":
        return value
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a whole number of lock-steps >= 0 or 'auto', got {value!r}")
    return value


LabelLag = Annotated[int | Literal["auto"], BeforeValidator(_label_lag)]


def _advisor_shorthand(value: Any) -> Any:
    """``none`` / a URL / a list of URLs / ``spawn:BACKEND`` → the full mapping."""
    if value is None or value == "none":
        return {}
    if isinstance(value, str):
        if value.startswith("spawn:"):
            return {"spawn": value.removeprefix("spawn:")}
        return {"urls": [value]}
    if isinstance(value, list):
        return {"urls": value}
    return value


class AdvisorConfig(_Strict):
    """Where advice comes from: nowhere, running servers (replicas), or a server this run starts.

    ``label_mode`` decides when answers reach the replay entries (ARCHITECTURE §6):
    ``repeatable`` attaches the answer about o_t when lock-step t + ``label_lag_steps`` is
    stored, waiting only for an answer later than that, so a seed gives the same run;
    ``async`` attaches each answer whenever it arrives (never waits; runs do not repeat).
    """

    urls: list[str] = Field(default_factory=list, description="base URLs of running advisor servers")
    spawn: str | None = Field(None, description="start `found-rl serve --advisor SPAWN` for this run")
    spawn_options: dict[str, Any] = Field(default_factory=dict, description="its --advisor-option pairs")
    clip: str | None = Field(None, description="the spawned server's --clip backend")
    clip_options: dict[str, Any] = Field(default_factory=dict, description="its --clip-option pairs")
    send_image: bool = Field(True, description="urls: the server reads the RGB BEV "
                            "(a VLM: it gets the prompt's fields, nothing privileged); false: it is the expert, "
                            "sent its privileged state")
    timeout_s: FiniteFloat = Field(5.0, gt=0, description="per-request deadline")
    ready_timeout_s: FiniteFloat = Field(120.0, gt=0, description="how long a spawned server may take to load")
    label_mode: Literal["repeatable", "async"] = Field(
        "repeatable", description="repeatable: answers attach at a fixed lag (same seed, same run); async: on arrival"
    )
    label_lag_steps: LabelLag = Field(
        "auto", description="repeatable mode: lock-steps between storing o_t and attaching its answer; requests "
        "leave at half of it, so a longer lag sends a slow advisor larger, cheaper batches; auto: the shortest "
        "lag (16 to 256) whose half fills a request at the label rate (recorded in config.yaml)",
    )
    request_items: int = Field(
        16, ge=1, description="requests leave in batches of this many items, or once the oldest is half the "
        "label lag old (a served model answers a batch for about the price of one item)",
    )
    label_rate: LabelRate = Field(
        "auto", description="share of observations the advisor is asked about, a pure function of the step id; "
        "auto: a probe at start-up measures the advisor's answers/s and chooses it (recorded in config.yaml)",
    )
    auto_rate_steps_per_s: FiniteFloat = Field(
        100.0, gt=0, description="label_rate auto: the loop speed (env steps/s) the rate is chosen for",
    )
    auto_cpu_share: FiniteFloat = Field(
        0.15, gt=0, le=1, description="label_rate auto: the share of a core the advisor may take from the loop",
    )
    down_wait_s: FiniteFloat = Field(
        60.0, ge=0, description="repeatable mode: how long an advisor that gives no answer is asked again",
    )
    when_down: Literal["continue", "stop"] = Field(
        "continue", description="repeatable mode, after down_wait_s: continue without its labels (the run is "
        "marked not repeatable from that lock-step) or stop with an error",
    )

    @model_validator(mode="after")
    def _one_source(self) -> AdvisorConfig:
        if self.urls and self.spawn:
            raise ValueError("give urls or spawn, not both")
        for url in self.urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"urls: {url!r} must start with http:// or https://")
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.urls or self.spawn)


def _as_path_list(value: Any) -> Any:
    """One path or a list of paths → a list (``scenario: a.yaml`` or ``scenario: [a.yaml, b.yaml]``)."""
    return [value] if isinstance(value, (str, Path)) else value


PathList = Annotated[list[Path], BeforeValidator(_as_path_list)]


class EvaluationConfig(_Strict):
    """Closed-loop evaluation with leaderboard metrics: before training, every
    ``every_env_steps``, and at the end.

    The headline is the evaluation towns (``scenarios`` and the ``suite``'s) whose road network
    no training scenario and no dataset the advisor learned from drove; towns the policy trained
    on, and the held-out routes of the first training town (``seen``), are reported apart and
    labelled as seen (ARCHITECTURE §9).
    """

    enabled: bool = True
    every_env_steps: int = Field(5000, ge=1)
    scenarios: PathList = Field(
        default_factory=list, description="evaluation towns: their route files, or `routes` random routes each"
    )
    suite: Path | None = Field(None, description="an evaluation suite file (scenarios/suites/): its towns too")
    routes_per_town: int | None = Field(
        None, ge=1, description="suite towns: only the first this many routes of each town's route file (all: null)"
    )
    repetitions: int = Field(1, ge=1, le=100, description="episodes per evaluation route, each under other traffic")
    seen: bool = Field(True, description="also drive held-out routes of the first training town (reported as seen)")
    routes: int = Field(5, ge=1, description="routes drawn where a town has random routes (held-out seeds)")
    held_out: list[int] | None = Field(
        None, description="route-file training town: indices of its held-out routes (default: the last `routes`)"
    )
    seed: int = Field(10_000, ge=0, description="seed of the evaluation routes and episodes")
    references: list[Literal["still", "throttle", "expert"]] = Field(
        default_factory=lambda: list(REFERENCE_AGENTS), description="reference policies shown beside the trained one"
    )
    video: bool = True
    background: bool = Field(
        True, description="training goes on while the evaluation workers drive a snapshot of the policy taken at "
        "the mark (the row is keyed to the mark all the same); false: training waits for each evaluation",
    )

    @model_validator(mode="after")
    def _something_to_drive(self) -> EvaluationConfig:
        if self.enabled and not self.seen and not self.scenarios and self.suite is None:
            raise ValueError("seen is false, scenarios is empty and there is no suite: nothing to evaluate on "
                             "(or set enabled: false)")
        if self.routes_per_town is not None and self.suite is None:
            raise ValueError("routes_per_town limits the routes of suite towns; set suite too")
        return self


class ResourcesConfig(_Strict):
    """Who gets the CPU. The update is the loop's critical path, so the learner's core is the
    learner's: the clip workers, a spawned advisor server and the evaluation workers run at a
    lower priority (a larger nice value) and with few threads of their own."""

    worker_nice: int = Field(5, ge=0, le=19, description="nice increment of the clip worker processes")
    server_nice: int = Field(5, ge=0, le=19, description="nice increment of a spawned advisor server")
    evaluator_nice: int = Field(10, ge=0, le=19, description="nice increment of the evaluation workers")
    server_threads: int = Field(
        0, ge=0, description="torch/OpenMP threads of a spawned advisor server (0: one per 4 usable cores, at least 1)"
    )
    learner_cpus: list[Annotated[int, Field(ge=0)]] | None = Field(
        None, description="pin the learner process to these CPU ids (default: no pinning)"
    )


class CheckpointConfig(_Strict):
    every_env_steps: int = Field(10_000, ge=1)
    save_replay: bool = Field(True, description="store the replay buffer so a resume continues exactly")


class RunConfig(_Strict):
    """Everything a training run depends on."""

    scenario: PathList = Field(description="training scenarios: one file, or a list the clips spread over")
    algorithm: str = Field("sac", description="the learner: a name in found_rl.algos.registry (sac, drqv2, ppo)")
    network: Literal["auto", "roach", "cpu"] = Field("auto", description="auto: cpu on a CPU, roach on CUDA")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    torch_threads: int = Field(
        0, ge=0, description="torch intra-op threads (0: one less than the usable cores, at least 1)"
    )
    seed: int = Field(0, ge=0)
    budget: BudgetConfig = BudgetConfig()
    sampler: SamplerConfig = SamplerConfig()
    learner: LearnerConfig = LearnerConfig()
    guidance: Guidance = Guidance()
    advisor: Annotated[AdvisorConfig, BeforeValidator(_advisor_shorthand)] = AdvisorConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()
    resources: ResourcesConfig = ResourcesConfig()

    @model_validator(mode="before")
    @classmethod
    def _learner_guidance_defaults(cls, data: Any) -> Any:
        """Guidance fields the config leaves unset take the learner's own defaults where its
        registry entry has some (DrQ-v2's AWAG schedule); the resolved values are recorded."""
        if not isinstance(data, dict):
            return data
        try:
            defaults = learner_entry(data.get("algorithm", cls.model_fields["algorithm"].default)).guidance_defaults()
        except ValueError:
            return data  # the algorithm field names the problem
        guidance = data.get("guidance", {})
        if not defaults or not isinstance(guidance, (dict, Guidance)):
            return data  # nothing to fill, or the guidance field names the problem
        given = _fields_set(guidance)
        for name, settings in defaults.items():
            user = given.get(name, {})
            if isinstance(user, (dict, BaseModel)):  # anything else: the field names the problem
                given[name] = {**settings.model_dump(), **_fields_set(user)}
        return {**data, "guidance": given}

    @field_validator("algorithm")
    @classmethod
    def _known_learner(cls, name: str) -> str:
        return learner_entry(name).name

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        if not self.scenario:
            raise ValueError("scenario: is an empty list; name at least one training scenario")
        learner = learner_entry(self.algorithm)
        if learner.on_policy and self.sampler.overlap:
            raise ValueError(
                f"sampler.overlap: {self.algorithm} is on-policy (a rollout must come from the policy it updates), "
                "so acting cannot overlap its update; set false"
            )
        learner.check_guidance(self.guidance)
        for term in self.guidance.enabled_terms:
            if term is not GuidanceTerm.CLIP_BONUS and not self.advisor.enabled:
                raise ValueError(f"guidance.{term.value}: needs advisor labels, but advisor is none (set advisor)")
        if self.advisor.enabled and not self.guidance.enabled_terms:
            raise ValueError(
                "advisor: is set, but no guidance term uses its answers; enable one of guidance."
                + ", guidance.".join(term.value for term in learner.guidance) + ", or set advisor: none"
            )
        if self.guidance.clip_bonus.enabled and not self.advisor.enabled:
            raise ValueError("guidance.clip_bonus: needs an advisor server with a CLIP backend (advisor)")
        if self.guidance.clip_bonus.enabled and self.advisor.spawn and not self.advisor.clip:
            raise ValueError("guidance.clip_bonus: the spawned server has no CLIP backend; set advisor.clip")
        return self

    @property
    def overlaps(self) -> bool:
        """Whether the loop runs the updates while the clips step (``sampler.overlap``; by
        default on for a learner with a replay buffer)."""
        if self.sampler.overlap is not None:
            return self.sampler.overlap
        return not learner_entry(self.algorithm).on_policy

    def to_yaml_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def _fields_set(settings: Any) -> dict[str, Any]:
    """The fields a user gave: a mapping as it is, a settings object's explicitly set fields."""
    if isinstance(settings, BaseModel):
        return {name: getattr(settings, name) for name in settings.model_fields_set}
    return dict(settings) if isinstance(settings, dict) else settings


def _set_dotted(data: dict[str, Any], key: str, value: Any, flag: str) -> None:
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise UserError(f"{flag} {key}=...: {part} is not a section")
        node = child
    node[parts[-1]] = value


def apply_overrides(data: dict[str, Any], pairs: list[str]) -> dict[str, Any]:
    """Apply ``key.path=value`` pairs (value read as YAML: ``3``, ``true``, ``[a, b]``).

    Raises:
        ValueError: naming the pair that is not ``key=value``.
    """
    data = yaml.safe_load(yaml.safe_dump(data))  # a deep copy
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            raise UserError(f"--set {pair!r}: expected KEY=VALUE with a dotted key, e.g. budget.env_steps=5000")
        try:
            value = yaml.safe_load(text) if text else ""
        except yaml.YAMLError as exc:
            raise UserError(f"--set {pair!r}: value is not valid YAML: {yaml_problem(exc)}") from None
        _set_dotted(data, key, value, "--set")
    return data


def _read_yaml(path: Path) -> Any:
    if path.is_dir():
        raise UserError(f"{path}: is a folder; pass a scenario or run config YAML file")
    if not path.is_file():
        raise MissingPathError(f"{path}: no such file")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not a UTF-8 text file (byte {exc.start})") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: malformed YAML: {yaml_problem(exc)}") from None


def default_run_config(scenario: Path) -> dict[str, Any]:
    """Run settings for training straight from a scenario file: SAC with VMR and AWAG, the
    privileged expert served as the advisor (so it runs on any CPU), the budget of the quickstart."""
    return {
        "scenario": [str(scenario.resolve())],
        "advisor": {"spawn": "expert"},
        # 12.75 minutes of training on a 2-core laptop, whichever limit comes first: with start-up,
        # the reference evaluations and the final one, the whole command stays within 15 minutes
        "budget": {"env_steps": 60_000, "wall_time_s": 765},
        # batch 64: on a CPU learning is update-bound, and halving the batch doubles the updates
        "learner": {"replay_capacity": 40_000, "batch_size": 64},
        "evaluation": {"every_env_steps": 10_000},
        "checkpoint": {"every_env_steps": 25_000},
        "guidance": {
            # The published schedules (50k–300k steps) are for 1M-step runs; a laptop budget
            # keeps the margin on throughout and leans on AWAG harder (docs/method.md).
            "vmr": {"enabled": True, "decay_start_steps": 20_000, "decay_end_steps": 40_000},
            # the expert drives at the action bounds (full throttle): imitate its action, not log π
            "awag": {"enabled": True, "coef": 2.5, "loss": "mode_mse"},
        },
    }


def is_run_config(data: Any) -> bool:
    """A run config has a field only run configs have (its ``scenario``, ...); a scenario file has a ``map``."""
    return is_run_config_data(data)


def _resolved(value: Any, base_dir: Path) -> Any:
    """Scenario paths (one or a list) made absolute against ``base_dir``; anything else as is."""
    if isinstance(value, str):
        return str((base_dir / value).resolve())
    if isinstance(value, list):
        return [_resolved(item, base_dir) if isinstance(item, str) else item for item in value]
    return value


def validate_run_config(data: Any, source: str, base_dir: Path) -> RunConfig:
    """Validate parsed YAML, resolving ``scenario`` against ``base_dir``.

    Raises:
        ValueError: one line per problem, each naming ``source`` and the field.
    """
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping of run settings, got {type(data).__name__}")
    data = {**data, "scenario": _resolved(data.get("scenario"), base_dir)}
    evaluation = data.get("evaluation")
    for key in ("scenarios", "suite"):
        if isinstance(evaluation, dict) and evaluation.get(key) is not None:
            evaluation = data["evaluation"] = {**evaluation, key: _resolved(evaluation[key], base_dir)}
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        lines = (format_field_error(source, data, e) for e in exc.errors())
        # a rule across fields names its fields itself
        raise UserError("\n".join(line.replace(": (top level): ", ": ", 1) for line in lines)) from None


def load_run_config(path: Path, overrides: list[str] | None = None) -> RunConfig:
    """A run config from a run-config or scenario file, with ``--set`` overrides applied.

    Raises:
        FileNotFoundError: the file (or the scenario it names) does not exist.
        ValueError: malformed YAML, an unknown key or a bad value (file and field named).
    """
    from found_rl.scenario import load_scenario

    data = _read_yaml(path)
    if not is_run_config(data):
        load_scenario(path)  # the scenario's own errors, before anything starts
        data = default_run_config(path)
    source = f"{path}" + (" with --set" if overrides else "")
    config = validate_run_config(apply_overrides(data, overrides or []), source, path.parent)
    for field, paths in (("scenario", config.scenario), ("evaluation.scenarios", config.evaluation.scenarios)):
        for index, scenario in enumerate(paths):
            if not scenario.is_file():
                raise MissingPathError(f"{source}: {field}[{index}]: {scenario}: no such scenario file")
            load_scenario(scenario)
    if config.evaluation.suite is not None:
        from found_rl.evaluation.suite import load_suite

        if not config.evaluation.suite.is_file():
            raise MissingPathError(f"{source}: evaluation.suite: {config.evaluation.suite}: no such suite file")
        load_suite(config.evaluation.suite)
    return config


def recorded_config(stored: dict[str, Any]) -> dict[str, Any]:
    """A run folder's recorded config read through today's schema: a section added since the run
    was recorded (``guidance.advisor_bc``) takes its default, so it is not a change on resume.
    A recording that no longer validates is returned as it is (its keys then show as changes)."""
    try:
        return RunConfig.model_validate(stored).to_yaml_dict()
    except ValidationError:
        return stored


def config_differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ, with both values (for refusing a mismatched resume)."""
    differences = []
    for key in sorted(set(old) | set(new)):
        path = f"{prefix}{key}"
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            differences += config_differences(a, b, f"{path}.")
        elif a != b:
            differences.append(f"{path}: {a!r} in the run, {b!r} now")
    return differences

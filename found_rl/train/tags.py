"""TensorBoard tags the training loop writes (ARCHITECTURE §9 groups; renaming one breaks curves).

The learner's own tags (``losses/``, ``guidance/vmr_loss``...) are defined with the learner.
The x-axis is always global env steps.
"""

EPISODIC_RETURN = "charts/episodic_return"
EPISODIC_LENGTH = "charts/episodic_length"
ROUTE_COMPLETION = "charts/route_completion"
EPISODE_CUT_BY_FAST = "charts/episode_cut_by_fast"
"""1 for an episode FAST's global truncation cut short, 0 for one that ended on its own"""
EPISODE_TAGS = (EPISODIC_RETURN, EPISODIC_LENGTH, ROUTE_COMPLETION, EPISODE_CUT_BY_FAST)

EVAL_ROUTE_COMPLETION = "charts/eval_route_completion"
EVAL_DRIVING_SCORE = "charts/eval_driving_score"
EVAL_INFRACTION_PENALTY = "charts/eval_infraction_penalty"
EVAL_TAGS = (EVAL_ROUTE_COMPLETION, EVAL_DRIVING_SCORE, EVAL_INFRACTION_PENALTY)
EVAL_RATE_PREFIX = "charts/eval_per_km_"
"""followed by an infraction kind, e.g. ``charts/eval_per_km_collision_vehicle``"""

ADVISOR_UP = "guidance/advisor_up"
LABEL_COVERAGE_REPLAY = "guidance/label_coverage_replay"
LABEL_LATENCY_STEPS = "guidance/label_latency_steps"
LABELS_IN_FLIGHT = "guidance/labels_in_flight"
LABELS_DROPPED = "guidance/labels_dropped"
LABELS_FAILED = "guidance/labels_failed"
LABELS_SKIPPED = "guidance/labels_skipped"
LABEL_TAGS = (
    ADVISOR_UP,
    LABEL_COVERAGE_REPLAY,
    LABEL_LATENCY_STEPS,
    LABELS_IN_FLIGHT,
    LABELS_DROPPED,
    LABELS_FAILED,
    LABELS_SKIPPED,
)
LATENCY_HISTOGRAM = "guidance/label_latency_steps_hist"

SPS = "perf/SPS"
UPDATES_PER_S = "perf/updates_per_s"
VALID_FRACTION = "perf/valid_fraction"
SHARE_PREFIX = "perf/share_"
"""followed by one of :data:`TIMED_PARTS`, e.g. ``perf/share_sampling``"""
TIMED_PARTS = ("sampling", "policy", "updates", "advisor", "evaluation", "checkpoint")
"""the parts of the loop with a wall-time share"""
PERF_TAGS = (SPS, UPDATES_PER_S, *(SHARE_PREFIX + part for part in TIMED_PARTS), VALID_FRACTION)

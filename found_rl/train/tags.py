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
EVAL_TAGS = (
    "charts/eval_route_completion",
    "charts/eval_driving_score",
    "charts/eval_infraction_penalty",
)
EVAL_RATE_PREFIX = "charts/eval_per_km_"
"""followed by an infraction kind, e.g. ``charts/eval_per_km_collision_vehicle``"""
LABEL_TAGS = (
    "guidance/advisor_up",
    "guidance/label_coverage_replay",
    "guidance/label_latency_steps",
    "guidance/labels_in_flight",
    "guidance/labels_dropped",
    "guidance/labels_failed",
    "guidance/labels_skipped",
)
LATENCY_HISTOGRAM = "guidance/label_latency_steps_hist"
PERF_TAGS = (
    "perf/SPS",
    "perf/updates_per_s",
    "perf/share_sampling",
    "perf/share_policy",
    "perf/share_updates",
    "perf/share_advisor",
    "perf/share_evaluation",
    "perf/share_checkpoint",
    "perf/valid_fraction",
)

"""When a run stops and its learning rate: epochs, a time budget that repeats epochs, or both."""

import pytest

from found_rl.clip.schedule import DEFAULT_EPOCHS, RunLength, learning_rate


def test_schedule_warms_up_then_decays_to_zero():
    length = RunLength(steps_per_epoch=10, epochs=10, max_minutes=None)

    def lr(step: int) -> float:
        return learning_rate(step, length.progress(step, 0.0, warmup_steps=10), 1.0, warmup_steps=10)

    assert lr(0) == pytest.approx(0.1)
    assert lr(9) == pytest.approx(1.0)
    assert lr(55) == pytest.approx(0.5)
    assert lr(100) == pytest.approx(0.0)


def test_a_time_budget_alone_repeats_epochs_until_the_time_is_used():
    length = RunLength.of(steps_per_epoch=10, epochs=None, max_minutes=2.0)
    assert length.total_steps is None
    assert length.stop_reason(step=10_000, elapsed_s=119.0) is None  # a thousand epochs, time left
    assert length.stop_reason(step=10_001, elapsed_s=120.0) == "--max-minutes 2"
    assert length.progress(step=5, elapsed_s=60.0) == pytest.approx(0.5)  # the decay follows the clock


def test_with_both_rules_the_nearer_one_stops_the_run_and_drives_the_decay():
    length = RunLength(steps_per_epoch=10, epochs=2, max_minutes=1.0)
    assert length.stop_reason(step=20, elapsed_s=10.0) == "--epochs 2"
    assert length.stop_reason(step=5, elapsed_s=60.0) == "--max-minutes 1"
    assert length.progress(step=15, elapsed_s=6.0) == pytest.approx(0.75)
    assert length.progress(step=5, elapsed_s=54.0) == pytest.approx(0.9)


def test_without_either_rule_the_default_epochs_stop_the_run():
    length = RunLength.of(steps_per_epoch=3, epochs=None, max_minutes=None)
    assert (length.epochs, length.total_steps) == (DEFAULT_EPOCHS, 3 * DEFAULT_EPOCHS)
    assert length.stop_reason(3 * DEFAULT_EPOCHS, 0.0) == f"--epochs {DEFAULT_EPOCHS}"


@pytest.mark.parametrize(
    ("epochs", "max_minutes", "message"),
    [(None, None, "needs epochs or max_minutes"), (0, None, "--epochs"), (None, 0.0, "--max-minutes")],
)
def test_a_run_that_would_never_stop_is_refused(epochs, max_minutes, message):
    with pytest.raises(ValueError, match=message):
        RunLength(4, epochs, max_minutes)

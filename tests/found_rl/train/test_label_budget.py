"""The label budget: a pure function of the step id and the rate, spread evenly, and the rate
an advisor's measured speed affords."""

import numpy as np
import pytest

from found_rl.train.label_budget import (
    check_rate,
    is_labelled,
    lag_for,
    probe_answers_per_s,
    rate_at_own_batch,
    rate_for,
    request_sizes,
    step_uniforms,
)


def all_ids(clips=4, episodes=50, steps=100):
    clip, episode, step = np.meshgrid(np.arange(clips), np.arange(episodes), np.arange(steps), indexing="ij")
    return clip.ravel(), episode.ravel(), step.ravel()


def test_the_subset_is_a_pure_function_of_step_id_and_rate():
    clip, episode, step = all_ids()
    whole = is_labelled(clip, episode, step, 0.3)
    order = np.random.default_rng(0).permutation(clip.size)
    shuffled = is_labelled(clip[order], episode[order], step[order], 0.3)
    np.testing.assert_array_equal(shuffled, whole[order])  # another batching, the same answer per id
    one_by_one = [bool(is_labelled(c, e, s, 0.3)) for c, e, s in zip(clip[:200], episode[:200], step[:200])]
    assert one_by_one == whole[:200].tolist()
    assert step_uniforms(3, 7, 11) == step_uniforms(np.array([3]), np.array([7]), np.array([11]))[0]


@pytest.mark.parametrize("rate", [0.05, 0.25, 0.6])
def test_the_subset_takes_the_rate_of_every_clip_and_every_phase_of_an_episode(rate):
    clip, episode, step = all_ids()
    chosen = is_labelled(clip, episode, step, rate)
    assert abs(chosen.mean() - rate) < 0.02
    for c in range(4):  # no clip starved
        assert abs(chosen[clip == c].mean() - rate) < 0.03
    early, late = chosen[step < 10].mean(), chosen[step >= 90].mean()  # no phase of an episode skipped
    assert abs(early - rate) < 0.04 and abs(late - rate) < 0.04


def test_a_larger_rate_labels_a_superset_and_rate_one_labels_everything():
    clip, episode, step = all_ids()
    small, large = is_labelled(clip, episode, step, 0.2), is_labelled(clip, episode, step, 0.5)
    assert not (small & ~large).any()
    assert is_labelled(clip, episode, step, 1.0).all()


@pytest.mark.parametrize("bad", [0, -0.1, 1.01, float("nan"), True, "half"])
def test_a_rate_outside_zero_one_is_refused_naming_the_field(bad):
    with pytest.raises(ValueError, match=r"advisor\.label_rate"):
        check_rate(bad)


def test_the_rate_an_advisor_affords():
    assert rate_for(400.0, 100.0, cpu_share=0.5) == 1.0  # fast enough for every observation
    assert rate_for(30.0, 100.0, cpu_share=0.5) == 0.15  # half a core's 30 answers/s over 100 env steps/s
    assert rate_for(200.0, 100.0) == 0.3  # the default: 15 % of a core
    assert rate_for(7.3, 100.0, cpu_share=0.5) == 0.036  # two significant digits, rounded down
    assert rate_for(0.0, 100.0) == 0.01  # never zero: a probe that failed still asks about some


class InstantClient:
    """Answers each item at the next poll; every third one fails. Records the request sizes."""

    def __init__(self):
        self.queue = []
        self.requests = []

    def submit_many(self, items):
        self.requests.append(len(items))
        self.queue += [(item_id, {"ok": not item_id.endswith("2")}) for item_id, _, _ in items]

    def poll(self, wait_s=0.0):
        ready, self.queue = self.queue, []
        return ready


def test_the_probe_sends_requests_of_the_size_asked_and_counts_answered_items():
    client = InstantClient()
    rate = probe_answers_per_s(client, [({"command": 4}, "advise")], items=30, rounds=2)
    assert rate > 0
    assert client.requests == [30, 30]


def test_the_probe_counts_answers_per_second_of_its_clock():
    """A spawned server's CPU time: what its answers take from the loop, not the round trips."""
    ticks = iter(range(0, 100, 2))  # each request costs 2 clock-seconds

    rate = probe_answers_per_s(InstantClient(), [({"command": 4}, "advise")], items=6, rounds=3,
                               clock=lambda: float(next(ticks)))
    assert rate == (5 + 5) / (2 + 2)  # two timed requests of 6 items, the one with an id ending in 2 failing


def test_request_sizes_double_up_to_the_largest():
    assert request_sizes(16) == [1, 2, 4, 8, 16]
    assert request_sizes(12) == [1, 2, 4, 8, 12]
    assert request_sizes(1) == [1]


def test_the_rate_is_budgeted_at_the_size_of_the_requests_it_makes():
    """Per item, a VLM answers 16 at once far faster than one: a rate chosen at 16 items, whose
    requests hold 3, would take several times its CPU share."""
    measured = {1: 40.0, 2: 60.0, 4: 90.0, 8: 140.0, 16: 200.0}

    def items_per_request(rate):  # 4 clips, flushed every 4 lock-steps
        return min(16, 4 * rate * 4)

    rate, items, answers_per_s = rate_at_own_batch(measured, 100.0, items_per_request)
    # 0.3 chosen at 16 items would make requests of 4.8 items
    assert (rate, items, answers_per_s) == (0.06, pytest.approx(0.96), 40.0)
    faster = {1: 100.0, 2: 150.0, 4: 220.0, 8: 300.0, 16: 400.0}
    rate, items, _ = rate_at_own_batch(faster, 100.0, items_per_request)
    assert (rate, items) == (0.4, pytest.approx(6.4))  # between the measured sizes
    assert 0.15 * (220 + 80 * (items - 4) / 4) / 100 == pytest.approx(rate, abs=0.01)  # a fixed point
    assert rate_at_own_batch({1: 1000.0, 16: 1000.0}, 100.0, items_per_request) == (1.0, 16, 1000.0)


def test_the_auto_lag_is_the_shortest_whose_half_fills_a_request():
    assert lag_for(1.0, 4, 16) == 16  # every observation of 4 clips: 16 items in 4 lock-steps
    assert lag_for(0.05, 4, 16) == 160  # 0.2 items a lock-step: 16 items in 80
    assert lag_for(0.05, 4, 16) * 0.05 * 4 / 2 == 16
    assert lag_for(0.001, 4, 16) == 256  # capped: a few percent of a short run
    assert lag_for(1.0, 64, 16) == 16  # never below the shortest


def test_with_an_auto_lag_a_slow_advisor_is_budgeted_at_full_requests():
    """A trained VLM served beside the loop answers 22 items per CPU second one at a time and 71 in
    batches of 16. A fixed lag of 16 at a low rate sends requests of about one item, and the rate
    settles where single items cost; the auto lag waits for full requests and affords 3x more."""
    measured = {1: 22.0, 2: 29.0, 4: 45.0, 8: 64.0, 16: 71.0}

    def fixed_lag(rate):  # 4 clips, flushed at half of 16 lock-steps
        return min(16, 4 * rate * 8)

    def auto_lag(rate):
        return min(16, 4 * rate * (lag_for(rate, 4, 16) // 2))

    slow, slow_items, _ = rate_at_own_batch(measured, 100.0, fixed_lag)
    assert (slow, slow_items) == (0.033, pytest.approx(1.056))
    assert rate_at_own_batch(measured, 100.0, auto_lag) == (0.1, 16, 71.0)

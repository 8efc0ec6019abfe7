"""The label budget: a pure function of the step id and the rate, spread evenly, and the rate
an advisor's measured speed affords."""

import numpy as np
import pytest

from found_rl.train.label_budget import check_rate, is_labelled, probe_answers_per_s, rate_for, step_uniforms


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
    """Answers each item at the next poll; every third one fails."""

    def __init__(self):
        self.queue = []

    def submit(self, item_id, payload, kind="advise"):
        self.queue.append((item_id, {"ok": not item_id.endswith("2")}))

    def poll(self, wait_s=0.0):
        ready, self.queue = self.queue, []
        return ready


def test_the_probe_counts_answered_items_per_second():
    rate = probe_answers_per_s(InstantClient(), [({"command": 4}, "advise")], items=30, rounds=2)
    assert rate > 0

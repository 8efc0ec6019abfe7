import numpy as np
import pytest

from found_rl.clip.sampling import balanced_epoch_order, epoch_order, is_junction


def test_junction_frames_are_drawn_to_their_share_and_the_order_replays():
    command_rows = np.array([3] * 900 + [0] * 50 + [2] * 50)  # 10 % junction frames
    junction = is_junction(command_rows)
    assert junction.sum() == 100
    order = balanced_epoch_order(junction, 0.4, seed=1, epoch=3)
    assert len(order) == 1000
    assert junction[order].mean() == pytest.approx(0.4, abs=0.05)
    np.testing.assert_array_equal(order, balanced_epoch_order(junction, 0.4, seed=1, epoch=3))
    assert not np.array_equal(order, balanced_epoch_order(junction, 0.4, seed=1, epoch=4))


def test_plain_order_is_a_permutation():
    assert sorted(epoch_order(10, seed=0, epoch=2)) == list(range(10))


def test_balancing_needs_junction_frames():
    with pytest.raises(ValueError, match=r"--junction-share 0\.3: the training frames hold 0 junction"):
        balanced_epoch_order(np.zeros(10, dtype=bool), 0.3, seed=0, epoch=0)

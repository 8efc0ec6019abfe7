"""The machine-load probes printed beside benchmark numbers."""

from found_rl.bench.load import describe_load, load_average, numpy_call_us


def test_probes_measure_something():
    assert 0 < numpy_call_us() < 1e4
    load = load_average()
    assert load is None or (len(load) == 3 and all(value >= 0 for value in load))


def test_description_names_both_probes():
    line = describe_load(1.234, [2.0, 1.5, 1.0])
    assert "1.23 us" in line and "2.00 / 1.50 / 1.00 (1 / 5 / 15 min)" in line
    assert "unknown" in describe_load(0.5, None)

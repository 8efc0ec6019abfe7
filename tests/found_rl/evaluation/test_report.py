"""The eval summary table labels its units: scores in %, simulated and wall-clock seconds apart."""

import io

from rich.console import Console

from found_rl.evaluation.report import print_summary
from found_rl.evaluation.results import ResultsFile, build_record
from found_rl.events import EpisodeStatus, EpisodeSummary
from found_rl.metrics import route_scores


def summary(route: int, duration_s: float) -> EpisodeSummary:
    return EpisodeSummary(f"r{route}", EpisodeStatus.COMPLETED, 1.0, 100.0, 100.0, 0.0, duration_s, 10, ())


def test_sim_and_wall_seconds_have_their_own_labelled_columns(tmp_path):
    results = ResultsFile(tmp_path / "r.json", {"agent": "test"}, total=2)
    for index, (sim_s, wall_s) in enumerate([(95.4, 12.25), (40.0, 3.75)]):
        episode = summary(index, sim_s)
        results.add(build_record(index, 0, episode, route_scores(episode), wall_s))
    out = io.StringIO()
    print_summary(results, Console(file=out, width=200))
    lines = out.getvalue().replace("┃", "│").splitlines()  # rich draws the header row heavier
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines if "│" in line]
    header = rows[0]
    assert header[-2:] == ["sim time s", "wall time s"]
    by_route = {row[0]: dict(zip(header, row)) for row in rows[1:]}
    assert by_route["RouteScenario_r0_rep0"]["sim time s"] == "95"
    assert by_route["RouteScenario_r0_rep0"]["wall time s"] == "12.2"
    assert (by_route["mean"]["sim time s"], by_route["mean"]["wall time s"]) == ("68", "8.0")

"""Traffic-light stop lines of a SUMO network and their state over time.

SUMO signals each *link* (lane-to-lane connection) separately; CARLA and the BEV see one
stop line per incoming lane. A lane's state is that of its link along the ego's route when
the route uses the lane, else of its straight (or first) link. Fixed-time (static) programs
are read once, so the remaining time of a state (which may span several SUMO phases, e.g.
green for straight while only the left-turn arrow changes) is a table lookup per phase
change. Actuated, delay-based and NEMA programs, rail crossings and rail signals switch on
detector or train events: their links are read from SUMO's current state string every step,
and the time left in a state is unknown (``inf``). Lights whose links carry no cars (rail
signals, bus or bicycle signals) and lights without links get no stop line.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from found_rl.world import LightState, StopLines
from found_rl.world.frames import SumoFrame

_STATE_OF_CHAR = {
    "G": LightState.GREEN, "g": LightState.GREEN,
    "y": LightState.YELLOW, "Y": LightState.YELLOW, "u": LightState.YELLOW,
    "r": LightState.RED, "R": LightState.RED, "s": LightState.RED,
    "o": LightState.NONE, "O": LightState.NONE,
}  # fmt: skip


def stop_line_segment(lane_shape: np.ndarray, width_m: float) -> np.ndarray:
    """``(2, 2)`` segment across the end of a lane (SUMO frame), perpendicular to its last piece."""
    end, before = lane_shape[-1], lane_shape[-2]
    direction = (end - before) / max(np.linalg.norm(end - before), 1e-9)
    normal = np.array([-direction[1], direction[0]]) * (width_m / 2.0)
    return np.stack([end + normal, end - normal])


def state_codes(states: Sequence[str], num_links: int = 0) -> np.ndarray:
    """``(P, L) int8`` :class:`LightState` per phase and link.

    ``L`` is the longest state string or ``num_links``, whichever is more; links a state
    string does not reach (a shorter string, a link index past its end) are ``NONE``.
    """
    width = max([num_links, *map(len, states)])
    codes = np.full((len(states), width), int(LightState.NONE), dtype=np.int8)
    for phase, state in enumerate(states):
        codes[phase, : len(state)] = [int(_STATE_OF_CHAR.get(c, LightState.NONE)) for c in state]
    return codes


def link_state_tables(
    states: Sequence[str], durations_s: Sequence[float], num_links: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per phase and link: state code, seconds the state lasts after the phase ends, run length.

    Args:
        states: one SUMO state string per phase (one char per link).
        durations_s: phase durations.
        num_links: links the light controls (at least; see :func:`state_codes`).

    Returns:
        ``codes (P, L) int8``, ``after_s (P, L)`` (time the same state continues after phase
        ``p`` ends) and ``run_s (P, L)`` (total duration of the contiguous run containing ``p``;
        ``inf`` for a state that never changes).
    """
    codes = state_codes(states, num_links)
    durations = np.asarray(durations_s, dtype=np.float64)
    num_phases, num_links = codes.shape
    after = np.zeros((num_phases, num_links))
    run = np.zeros((num_phases, num_links))
    for link in range(num_links if num_phases else 0):
        column = codes[:, link]
        if np.all(column == column[0]):
            after[:, link] = run[:, link] = np.inf
            continue
        for phase in range(num_phases):
            extra, k = 0.0, (phase + 1) % num_phases
            while column[k] == column[phase]:
                extra += durations[k]
                k = (k + 1) % num_phases
            before, k = 0.0, (phase - 1) % num_phases
            while column[k] == column[phase]:
                before += durations[k]
                k = (k - 1) % num_phases
            after[phase, link] = extra
            run[phase, link] = before + durations[phase] + extra
    return codes, after, run


@dataclass(frozen=True)
class LightProgram:
    """The program SUMO runs for one light.

    Attributes:
        states: one state string per phase (none for a rail signal, which follows trains).
        durations_s: phase durations.
        fixed_time: a static program with phases, whose states follow the phase table; every
            other program is read from SUMO's state string (module docstring).
    """

    states: tuple[str, ...]
    durations_s: tuple[float, ...]
    fixed_time: bool


def running_programs(libsumo) -> dict[str, LightProgram]:
    """``tls_id -> LightProgram`` of the program each light runs now (one of several, or ``off``)."""
    light = libsumo.trafficlight
    programs = {}
    for tls_id in light.getIDList():
        program_id = light.getProgram(tls_id)
        logic = next((c for c in light.getAllProgramLogics(tls_id) if c.programID == program_id), None)
        if logic is None:  # e.g. switched "off": no logic is listed for it
            programs[tls_id] = LightProgram((), (), fixed_time=False)
            continue
        states = tuple(p.state for p in logic.phases)
        programs[tls_id] = LightProgram(
            states,
            tuple(float(p.duration) for p in logic.phases),
            fixed_time=logic.type == libsumo.TRAFFICLIGHT_TYPE_STATIC and bool(states),
        )
    return programs


@dataclass(frozen=True)
class _Light:
    tls_id: str
    program: LightProgram
    codes: np.ndarray
    after_s: np.ndarray
    run_s: np.ndarray


class TrafficLightTable:
    """Stop lines of every signalised incoming lane, updated from SUMO's current signals.

    Args:
        net: sumolib network.
        frame: SUMO → CARLA frame.
        programs: the running program of each light (:func:`running_programs`).

    Attributes:
        tls_ids: fixed-time lights, updated by :meth:`set_phases`.
        signal_ids: every other light with a stop line, updated by :meth:`set_signal_states`.
        resync_ids: lights whose running program has phases (safe to set a phase of).
    """

    def __init__(self, net, frame: SumoFrame, programs: dict[str, LightProgram]) -> None:
        self._lights: list[_Light] = []
        ids, lanes, segments, light_index = [], [], [], []
        self._links_of_lane: dict[str, dict[str, int]] = {}
        self._default_link: list[int] = []
        for tls in net.getTrafficLights():
            tls_id = tls.getID()
            if tls_id not in programs:
                continue
            by_lane: dict[str, list] = {}
            for in_lane, out_lane, link_index in tls.getConnections():
                # Index -1: a link the light does not signal (a rail crossing's rail links).
                if link_index >= 0 and in_lane.allows("passenger") and out_lane.allows("passenger"):
                    by_lane.setdefault(in_lane.getID(), []).append((in_lane, out_lane, link_index))
            if not by_lane:
                continue  # signals for trains, buses or bicycles only: no stop line for cars
            program = programs[tls_id]
            num_links = 1 + max(link for entries in by_lane.values() for *_, link in entries)
            if program.fixed_time:
                codes, after, run = link_state_tables(program.states, program.durations_s, num_links)
            else:
                codes, after, run = (np.zeros((0, num_links), np.int8), np.zeros((0, num_links)),
                                     np.zeros((0, num_links)))  # fmt: skip
            self._lights.append(_Light(tls_id, program, codes, after, run))
            for lane_id, entries in sorted(by_lane.items()):
                in_lane = entries[0][0]
                shape = np.asarray(in_lane.getShape(), dtype=np.float64)
                straight = [e[2] for e in entries if _direction(e[0], e[1]) == "s"]
                ids.append(tls_id)
                lanes.append(lane_id)
                segments.append(frame.to_carla_xy(stop_line_segment(shape, in_lane.getWidth())))
                light_index.append(len(self._lights) - 1)
                self._default_link.append(straight[0] if straight else entries[0][2])
                self._links_of_lane[lane_id] = {out.getID(): link for _, out, link in entries}
        self._fixed = [i for i, light in enumerate(self._lights) if light.program.fixed_time]
        self._signal = [i for i, light in enumerate(self._lights) if not light.program.fixed_time]
        self.tls_ids = tuple(self._lights[i].tls_id for i in self._fixed)
        self.signal_ids = tuple(self._lights[i].tls_id for i in self._signal)
        self.resync_ids = tuple(tls_id for tls_id, program in programs.items() if program.states)
        self._ids = tuple(ids)
        self._lanes = tuple(lanes)
        self._segments = np.asarray(segments, dtype=np.float64).reshape(-1, 2, 2)
        self._light_index = np.asarray(light_index, dtype=np.int64)
        self._links = np.asarray(self._default_link, dtype=np.int64)
        self._rows_of_light = [
            np.flatnonzero(self._light_index == i) for i in range(len(self._lights))
        ]
        self._phase = np.full(len(self._fixed), -1)
        self._next_switch = np.full(len(self._fixed), np.nan)
        self._signal_states: list[str | None] = [None] * len(self._signal)
        self._states = np.zeros(len(ids), np.int8)
        self._switch_abs = np.full(len(ids), np.inf)
        self._run = np.full(len(ids), np.inf)

    def __len__(self) -> int:
        return len(self._ids)

    def set_route(self, lane_ids: tuple[str, ...]) -> None:
        """Use the route's link on each signalised lane the route drives through."""
        links = np.asarray(self._default_link, dtype=np.int64)
        position = {lane: i for i, lane in enumerate(self._lanes)}
        next_normal: dict[str, str] = {}
        sequence = list(dict.fromkeys(lane_ids))
        normal = [lane for lane in sequence if not lane.startswith(":")]
        for a, b in itertools.pairwise(normal):
            next_normal[a] = b
        for lane, following in next_normal.items():
            if lane in position and following in self._links_of_lane[lane]:
                links[position[lane]] = self._links_of_lane[lane][following]
        self._links = links
        self._phase = np.full(len(self._fixed), -1)
        self._signal_states = [None] * len(self._signal)

    def set_phases(self, phases: np.ndarray, next_switch_s: np.ndarray) -> None:
        """Record each fixed-time light's current phase index and next switch time (SUMO seconds).

        Arrays handed out by :meth:`stop_lines` are never modified afterwards (a change
        builds new ones), so snapshots may share them.
        """
        changed = np.flatnonzero(
            (phases != self._phase) | (next_switch_s != self._next_switch)
        )
        if not len(changed):
            return
        states, switch_abs, run = self._states.copy(), self._switch_abs.copy(), self._run.copy()
        for fixed in changed:
            light_data = self._lights[self._fixed[fixed]]
            rows = self._rows_of_light[self._fixed[fixed]]
            phase = int(phases[fixed]) % len(light_data.codes)
            link = self._links[rows]
            states[rows] = light_data.codes[phase, link]
            switch_abs[rows] = next_switch_s[fixed] + light_data.after_s[phase, link]
            run[rows] = light_data.run_s[phase, link]
        self._states, self._switch_abs, self._run = states, switch_abs, run
        self._phase, self._next_switch = phases.copy(), next_switch_s.copy()

    def set_signal_states(self, signal_states: Sequence[str]) -> None:
        """Record the current state string of each light of :attr:`signal_ids` (same order)."""
        changed = [i for i, state in enumerate(signal_states) if state != self._signal_states[i]]
        if not changed:
            return
        states = self._states.copy()
        for signal in changed:
            rows = self._rows_of_light[self._signal[signal]]
            codes = state_codes([signal_states[signal]], 1 + int(self._links[rows].max()))
            states[rows] = codes[0, self._links[rows]]
            self._signal_states[signal] = signal_states[signal]
        self._states = states

    def stop_lines(self, time_s: float) -> StopLines:
        """Stop lines at SUMO time ``time_s``."""
        return StopLines(
            ids=self._ids,
            lane_ids=self._lanes,
            segments=self._segments,
            states=self._states,
            remaining_s=np.maximum(self._switch_abs - time_s, 0.0),
            phase_s=self._run,
        )


def _direction(in_lane, out_lane) -> str:
    for connection in in_lane.getOutgoing():
        if connection.getToLane() is out_lane:
            return connection.getDirection()
    return ""


def stop_sign_lines(net, frame: SumoFrame) -> StopLines:
    """Static stop lines of lanes that must stop at unsignalised stop junctions."""
    ids, lanes, segments = [], [], []
    for node in net.getNodes():
        if node.getType() not in ("priority_stop", "allway_stop"):
            continue
        for edge in node.getIncoming():
            for lane in edge.getLanes():
                if not lane.allows("passenger"):
                    continue
                states = {c.getState() for c in lane.getOutgoing()}
                if node.getType() == "allway_stop" or "s" in states:
                    ids.append(node.getID())
                    lanes.append(lane.getID())
                    shape = np.asarray(lane.getShape(), dtype=np.float64)
                    segments.append(
                        frame.to_carla_xy(stop_line_segment(shape, lane.getWidth()))
                    )
    if not ids:
        return StopLines.empty()
    count = len(ids)
    return StopLines(
        tuple(ids),
        tuple(lanes),
        np.asarray(segments),
        np.full(count, int(LightState.RED), np.int8),
        np.full(count, np.inf),
        np.full(count, np.inf),
    )

"""Seeded runs of a controller group under faults (tests/controller/sim.py says what is
injected and checked). A failure names its seed; replay it with

    CONTROLLER_SEED=1234 python3 -m pytest tests/controller/test_sim.py -k replay
"""

from __future__ import annotations

import os

import pytest

from ..raft.sim import InvariantViolated
from .sim import run_seed


@pytest.mark.parametrize("nodes", [3, 5])
def test_seeded_runs(nodes: int) -> None:
    failures = []
    for seed in range(40):
        try:
            run_seed(seed, nodes)
        except InvariantViolated as exc:
            failures.append(str(exc))
    assert not failures, "\n".join(failures[:10])


# Seeds bench/controller_sim.py once found failing, and what it was.
REGRESSIONS = [
    # A new leader whose followers were found (COMPARE, TRUNCATE) to hold its whole log, no-op
    # included, never asked them to ack it durable: with nothing proposed after it (the leader
    # proposes once its no-op is applied) nothing ever committed (rmq/raft/core.py).
    (3327, 3),
]


@pytest.mark.parametrize(("seed", "nodes"), REGRESSIONS)
def test_seeds_that_once_failed(seed: int, nodes: int) -> None:
    run_seed(seed, nodes)


def test_runs_exercise_elections_and_refusals() -> None:
    """The runs are not vacuous: masters die and are replaced, and epochs are fenced."""
    seen: dict[str, int] = {}
    closes = 0
    for seed in range(12):
        sim = run_seed(seed)
        assert sim.stats["crashes"] and sim.stats["partitions"]
        closes += sim.closes
        for key, count in sim.requests.items():
            seen[key] = seen.get(key, 0) + count
    for key in ("reelect:0", "elect:0", "elect:2011", "alter:0", "alter:2001", "apply:0", "register:0"):
        assert seen.get(key), (key, seen)
    assert closes


def test_a_seed_replays_the_same_run() -> None:
    a, b = run_seed(11), run_seed(11)
    assert (a.stats, a.requests, a.states_at) == (b.stats, b.requests, b.states_at)


@pytest.mark.skipif("CONTROLLER_SEED" not in os.environ, reason="set CONTROLLER_SEED to replay one run")
def test_replay() -> None:
    sim = run_seed(int(os.environ["CONTROLLER_SEED"]), int(os.environ.get("CONTROLLER_NODES", "3")))
    print(sim.stats, sim.requests)

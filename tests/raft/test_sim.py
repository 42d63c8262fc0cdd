"""Seeded fault-injection runs of 3- and 5-member groups (tests/raft/sim.py says what is
injected and checked). A failure names its seed; replay it with

    RAFT_SEED=1234 RAFT_NODES=5 python3 -m pytest tests/raft/test_sim.py -k replay

`python bench/raft_sim.py --seeds 10000` runs as many as asked.
"""

from __future__ import annotations

import os

import pytest

from .sim import run_seed, sweep_on_every_core


@pytest.mark.parametrize("nodes", [3, 5])
def test_seeded_runs(nodes: int) -> None:
    failures = sweep_on_every_core(range(400), nodes)
    assert not failures, "\n".join(failures[:10])


@pytest.mark.slow
@pytest.mark.parametrize("nodes", [3, 5])
def test_more_seeded_runs(nodes: int) -> None:
    failures = sweep_on_every_core(range(400, 1600), nodes)
    assert not failures, "\n".join(failures[:10])


def test_a_seed_replays_the_same_run() -> None:
    a, b = run_seed(77, 5), run_seed(77, 5)
    assert (a.stats, a.acked, a.leaders) == (b.stats, b.acked, b.leaders)
    assert a.stats["crashes"] and a.acked


@pytest.mark.skipif("RAFT_SEED" not in os.environ, reason="set RAFT_SEED (and RAFT_NODES) to replay one run")
def test_replay() -> None:
    sim = run_seed(int(os.environ["RAFT_SEED"]), int(os.environ.get("RAFT_NODES", "3")))
    print(sim.stats, len(sim.acked), "acknowledged")

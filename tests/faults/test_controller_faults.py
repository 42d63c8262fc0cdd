"""A controller-mode group (three brokers with allAckInSyncStateSet, three controllers)
under faults, our producer and the official C++ client sending throughout. Once healed,
nothing SEND_OK'd may be lost or stored twice, every broker's CommitLog must be a
byte-identical prefix of the longest (a deposed master cut back to what its successor
holds), consume queues complete, and a master taken away must be failed over from
(checker.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .nemesis import Fault, plan
from .run import Scenario, run

pytestmark = pytest.mark.slow

SECONDS = 22.0

SEEDS = {
    # the master killed (restarted at once), reset, cut off from the controllers, and paused
    # past the failover bound: it must learn it was deposed, acknowledge nothing meanwhile
    35: {("kill", "leader"), ("pause", "leader"), ("partition", "leader")},
}


@pytest.mark.parametrize("seed", sorted(SEEDS))
async def test_controller_group_under_faults(seed: int, tmp_path: Path) -> None:
    assert SEEDS[seed] <= {(f.kind, f.target) for f in plan(seed, SECONDS, "controller")}
    s = Scenario("controller", seed, seconds=SECONDS)
    report = await run(s, tmp_path)
    assert not report.problems, f"{report.summary()}\nreplay: {s.replay()}\nlogs: {tmp_path}"


async def test_the_master_killed_ten_times(tmp_path: Path) -> None:
    """kill -9 of whoever is master, restarted once its successor took over (past the
    controller's 3 s heartbeat timeout), ten times in a row, with the C++ client's send_sync
    waves as well as ours: each time another master takes sends within the bound, and the
    checks above hold (each restarted master cut back to its successor's log)."""
    kills = tuple(Fault(1.0 + 8.5 * i, "kill", "leader", 4.5) for i in range(10))
    s = Scenario("controller", 0, seconds=86.0, cpp=True, faults=kills, failover_bound=8.0)
    report = await run(s, tmp_path)
    assert report.faults["kill"] == 10
    assert len(report.failovers) == 10
    assert all(f.seconds is not None and f.seconds < 8.0 for f in report.failovers), report.summary()
    assert not report.problems, f"{report.summary()}\nlogs: {tmp_path}"

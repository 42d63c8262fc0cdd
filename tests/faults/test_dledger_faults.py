"""A DLedger group of three broker processes under a seeded nemesis, every link between two
members through a proxy of its own, our producer sending throughout. Once all is healed,
nothing SEND_OK'd may be lost or stored twice, the members' logs and consume queues must
agree, a leader taken away for long must have been failed over from, and the name server
must name the leader (checker.py, watch.py).

Each seed is a short schedule chosen for what it holds; a failure prints the checker's
report and the command that replays the seed (bench/nemesis.py runs long ones)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .nemesis import plan
from .run import Scenario, run

pytestmark = pytest.mark.slow

SECONDS = 22.0

SEEDS = {
    # the leader killed and restarted at once (senders with a stale route are there while it
    # boots); its connections reset, it is cut off, and then paused past the failover bound
    35: {("kill", "leader"), ("reset", "leader"), ("partition", "leader"), ("pause", "leader")},
    # the leader killed and its links slowed; then a follower whose name server link is slow
    # is handed the leadership and cut off at once: its late registrations must not leave
    # the name server naming it while another leads
    84: {("kill", "leader"), ("slow", "leader"), ("late_registration", "follower")},
}


@pytest.mark.parametrize("seed", sorted(SEEDS))
async def test_dledger_group_under_faults(seed: int, tmp_path: Path) -> None:
    assert SEEDS[seed] <= {(f.kind, f.target) for f in plan(seed, SECONDS, "dledger")}
    s = Scenario("dledger", seed, seconds=SECONDS)
    report = await run(s, tmp_path)
    assert not report.problems, f"{report.summary()}\nreplay: {s.replay()}\nlogs: {tmp_path}"

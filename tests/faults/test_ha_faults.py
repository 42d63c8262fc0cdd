"""A master and a slave as broker processes under a seeded nemesis, their HA link through a
proxy, our producer (and the official C++ client) sending. Once all is healed, nothing
SEND_OK'd may be lost or stored twice, the slave's CommitLog must be a prefix of the
master's and both must have every record in their consume queues (checker.py).

Each seed is a short schedule chosen for what it holds; a failure prints the checker's
report and the command that replays the seed (bench/nemesis.py runs long ones)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop.cpp_client import requires_cpp_client

from .nemesis import plan
from .run import Scenario, run

pytestmark = pytest.mark.slow

SECONDS = 20.0


async def check(s: Scenario, tmp_path: Path, covers: set[tuple[str, str]]) -> None:
    assert covers <= {(f.kind, f.target) for f in plan(s.seed, s.seconds, "ha")}
    report = await run(s, tmp_path)
    assert not report.problems, f"{report.summary()}\nreplay: {s.replay()}\nlogs: {tmp_path}"


async def test_async_master_runs_ahead_of_a_killed_then_paused_slave(tmp_path: Path) -> None:
    """An ASYNC_MASTER runs ahead of its slave while it is dead or paused; the slave then
    catches up in full chunks, which end inside records."""
    covers = {("kill", "slave"), ("pause", "slave"), ("pause", "master")}
    await check(Scenario("ha", 33, SECONDS, role="ASYNC_MASTER"), tmp_path, covers)


@pytest.mark.interop
@requires_cpp_client
async def test_sync_master_killed_paused_and_deaf_while_both_clients_send(tmp_path: Path) -> None:
    covers = {("kill", "master"), ("pause", "master"), ("one_way", "master")}
    await check(Scenario("ha", 30, SECONDS, cpp=True), tmp_path, covers)

"""The nemesis's plans: a seed names one schedule, and schedules cover every kind of fault."""

from __future__ import annotations

import collections
from pathlib import Path

from .nemesis import KINDS, TARGETS, EventLog, plan


def test_a_seed_names_one_schedule_and_another_seed_another() -> None:
    assert plan(7, 60, "dledger") == plan(7, 60, "dledger")
    assert plan(7, 60, "dledger") != plan(8, 60, "dledger")


def test_schedules_cover_every_kind_within_their_length_with_quiet_gaps() -> None:
    kinds: collections.Counter[str] = collections.Counter()
    for seed in range(40):
        for cluster in TARGETS:
            faults = plan(seed, 60, cluster)
            assert faults and all(f.target in TARGETS[cluster] for f in faults)
            assert all(0 < f.at < 60 for f in faults)
            for a, b in zip(faults, faults[1:], strict=False):
                assert b.at >= a.at + a.hold + 1.0  # one at a time, healed before the next
            kinds.update(f.kind for f in faults)
    assert set(kinds) == set(KINDS)


def test_holds_are_short_or_past_the_availability_bound() -> None:
    holds = [(f.kind, f.hold) for seed in range(40) for f in plan(seed, 120, "dledger") if f.kind in ("pause", "kill")]
    assert all(1.0 <= h <= 5.0 or 17.0 <= h <= 22.0 or (h == 0 and k == "kill") for k, h in holds)
    assert any(h >= 17.0 for _, h in holds) and any(0 < h <= 5.0 for _, h in holds) and any(h == 0 for _, h in holds)


def test_a_plan_can_be_limited_to_some_kinds() -> None:
    faults = plan(3, 120, "ha", kinds=("pause", "slow"))
    assert {f.kind for f in faults} == {"pause", "slow"}


async def test_the_event_log_stamps_lines_and_writes_them_as_they_come(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "n.log")
    log("pause n1")
    assert (tmp_path / "n.log").read_text().splitlines()[0].endswith("  pause n1")
    log.close()
    assert log.lines[0].split()[0].endswith("s")

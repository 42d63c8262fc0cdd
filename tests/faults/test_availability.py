"""The availability checks on made-up histories: failovers after leader faults, recoveries
after heals, and stretches in which the name server named a member that did not lead."""

from __future__ import annotations

from typing import Any, cast

from .checker import failovers, recoveries
from .load import TOPIC, Attempt, History
from .nemesis import Applied, Fault, leader_faults
from .watch import RouteWatch

A, B = "127.0.0.1:1", "127.0.0.1:2"


def history(*oks: tuple[float, str]) -> History:
    h = History(t0=0.0)
    h.attempts = [
        Attempt(f"k{i}.0", f"k{i}", "py", TOPIC, t - 0.01, t, "SEND_OK", store) for i, (t, store) in enumerate(oks)
    ]
    return h


def applied(kind: str, start: float, healed: float, *, leader: bool = True, address: str = A) -> Applied:
    return Applied(Fault(start, kind, "leader", healed - start), "n0", address, leader, start, healed)


def test_a_leader_fault_is_failed_over_from_when_another_member_answers_in_time() -> None:
    h = history((1.0, A), (13.0, A), (14.0, B))
    done, slow = failovers([applied("pause", 2.0, 20.0)], h, 12.0, elsewhere=True)
    assert [f.seconds for f in done] == [12.0] and slow == []
    done, slow = failovers([applied("pause", 1.5, 20.0)], h, 12.0, elsewhere=True)
    assert done[0].seconds == 12.5 and len(slow) == 1 and "first came after 12.5s" in slow[0]
    # held shorter than the bound: measured, not judged; not a leader then: not measured
    assert failovers([applied("kill", 1.5, 5.0)], h, 12.0, elsewhere=True)[1] == []
    assert failovers([applied("kill", 1.5, 30.0, leader=False)], h, 12.0, elsewhere=True) == ([], [])
    # a master and slave: the next SEND_OK from anyone, never judged
    done, slow = failovers([applied("kill", 1.5, 30.0)], h, 12.0, elsewhere=False)
    assert done[0].seconds == 11.5 and slow == []


def test_a_late_registration_takes_the_leader_away_only_in_a_dledger_group() -> None:
    """Elsewhere it slows the master's name server link and the master stays: no failover to
    measure (before, the next election's, for whatever cause, was counted as its own)."""
    h = history((1.0, A), (5.0, A), (30.0, B))
    late = [applied("late_registration", 2.0, 8.0)]
    done, _ = failovers(late, h, 12.0, elsewhere=True, kinds=leader_faults("controller"))
    assert done == []
    done, _ = failovers(late, h, 12.0, elsewhere=True, kinds=leader_faults("dledger"))
    assert [f.seconds for f in done] == [28.0]


def test_a_heal_followed_by_quiet_must_be_followed_by_a_send_ok() -> None:
    h = history((1.0, A), (30.0, A))
    faults = [applied("partition", 2.0, 3.0), applied("partition", 10.0, 11.0)]
    times, slow = recoveries(faults, h, 12.0, end=40.0)
    assert times == [27.0, 19.0]
    assert len(slow) == 1 and "healing partition of n0" in slow[0]  # the first was quiet for 7 s only


class _Cluster:
    """As much of a cluster as RouteWatch.wrong needs (nothing)."""


def test_wrong_routes_are_the_stretches_where_the_name_server_named_another() -> None:
    watch = RouteWatch(cast(Any, _Cluster()))
    watch.samples = [(0.0, A, A), (1.0, B, A), (2.0, None, A), (3.0, A, A), (4.0, A, B), (5.0, A, B)]
    wrong = watch.wrong()
    assert [(w.start, w.end, w.seconds) for w in wrong] == [(1.0, 3.0, 2.0), (4.0, 5.0, 1.0)]

"""A controller-mode master's SyncStateSet arithmetic (rmq/broker/ha/insync.py), values only."""

from __future__ import annotations

from rmq.broker.ha.insync import InSync


def test_all_ack_waits_for_every_member_and_a_disconnected_one_holds_it_back() -> None:
    s = InSync(local_id=1, all_ack=True)
    s.adopt(frozenset({1, 2, 3}), 4)
    assert s.confirm_offset({2: 500, 3: 300}, 900) == 300
    assert s.confirm_offset({2: 500}, 900) is None  # 3 is in the set but not connected
    s.adopt(frozenset({1, 2}), 5)
    assert s.confirm_offset({2: 500}, 900) == 500
    s.adopt(frozenset({1}), 6)
    assert s.confirm_offset({}, 900) == 900  # alone: its own end


def test_a_proposal_in_flight_counts_both_sets() -> None:
    s = InSync(local_id=1, all_ack=True)
    s.adopt(frozenset({1, 2}), 1)
    s.proposed = frozenset({1, 2, 3})
    assert s.confirm_offset({2: 500}, 900) is None  # 3 must hold it too until answered
    s.proposed = frozenset({1})
    assert s.effective() == {1, 2}
    assert not s.adopt(frozenset({1}), 0)  # an older answer changes nothing


def test_without_all_ack_in_sync_replicas_count() -> None:
    s = InSync(local_id=1, in_sync_replicas=2)
    s.adopt(frozenset({1, 2, 3}), 1)
    assert s.confirm_offset({2: 500, 3: 700}, 900) == 700  # the best slave suffices
    assert s.confirm_offset({}, 900) is None
    s.in_sync_replicas = 1
    assert s.confirm_offset({}, 900) == 900


def test_min_in_sync_replicas() -> None:
    s = InSync(local_id=1, min_in_sync_replicas=2)
    s.adopt(frozenset({1}), 1)
    assert s.not_enough() is not None
    s.adopt(frozenset({1, 2}), 2)
    assert s.not_enough() is None


def test_shrink_and_expand() -> None:
    s = InSync(local_id=1, max_not_caught_up_ms=1000, since_ms=7_000)
    s.adopt(frozenset({1, 2, 3}), 1)
    s.caught_up(2, 10_000)
    assert s.shrink(7_900) is None  # 3 has not caught up yet, but the master took office at 7 s
    s.caught_up(3, 8_000)
    assert s.shrink(8_900) is None
    assert s.shrink(10_200) == {1, 2}  # 3 last caught up 2.2 s ago
    s.adopt(frozenset({1, 2}), 2)
    assert s.expand(3, ack=400, confirm=500, epoch_start=100) is None
    assert s.expand(3, ack=500, confirm=500, epoch_start=600) is None  # not in this epoch yet
    assert s.expand(3, ack=700, confirm=500, epoch_start=600, now_ms=11_000) == {1, 2, 3}
    assert s.caught_up_ms[3] == 11_000
    assert s.expand(2, ack=700, confirm=500, epoch_start=600) is None  # in already


def test_needs_no_slave() -> None:
    s = InSync(local_id=1, all_ack=True)
    s.adopt(frozenset({1}), 1)
    assert s.needs_no_slave()
    s.adopt(frozenset({1, 2}), 2)
    assert not s.needs_no_slave()
    s.all_ack, s.in_sync_replicas = False, 1
    assert s.needs_no_slave()
    s.in_sync_replicas = 2
    assert not s.needs_no_slave()

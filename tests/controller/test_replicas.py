"""ReplicasInfoManager, DefaultElectPolicy and the heartbeat table: every request, its
refusals (with RocketMQ's codes), and the events it makes, applied."""

from __future__ import annotations

import json

import pytest

from rmq.controller.elect import DefaultElectPolicy
from rmq.controller.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    EventError,
    UpdateBrokerAddressEvent,
    decode_event,
    encode_event,
)
from rmq.controller.heartbeat import BrokerHeartbeatManager
from rmq.controller.replicas import ReplicasInfoManager, Result
from rmq.protocol import ResponseCode as R
from rmq.protocol.bodies.controller import SyncStateSet

C, G = "DefaultCluster", "broker-a"


def addr(i: int) -> str:
    return f"127.0.0.1:{10910 + i}"


def apply(m: ReplicasInfoManager, result: Result) -> Result:
    for e in result.events:
        m.apply(e)
    return result


def everyone(cluster: str, name: str, broker_id: int) -> bool:
    return True


def only(*ids: int):  # type: ignore[no-untyped-def]
    return lambda cluster, name, broker_id: broker_id in ids


def group(n: int = 3, *, unclean: bool = False) -> ReplicasInfoManager:
    """A group of n brokers, ids 1..n, broker 1 its first master, the SyncStateSet all of them."""
    m = ReplicasInfoManager(enable_elect_unclean_master=unclean)
    for i in range(1, n + 1):
        assert m.next_broker_id(C, G).header.next_broker_id == i  # type: ignore[union-attr]
        assert apply(m, m.apply_broker_id(C, G, i, f"{addr(i)};{i}")).code == R.SUCCESS
        assert apply(m, m.register_broker(C, G, i, addr(i), everyone)).code == R.SUCCESS
    r = apply(m, m.elect_master(G, 1, False, DefaultElectPolicy(everyone)))
    assert r.code == R.SUCCESS and r.header.master_broker_id == 1  # type: ignore[union-attr]
    if n > 1:
        s = m.sync_states[G]
        r = apply(
            m,
            m.alter_sync_state_set(
                G, 1, s.master_epoch, SyncStateSet(frozenset(range(1, n + 1)), s.sync_state_set_epoch), everyone
            ),
        )
        assert r.code == R.SUCCESS
    return m


def test_first_registration_and_first_master() -> None:
    m = ReplicasInfoManager()
    assert m.next_broker_id(C, G).header.next_broker_id == 1  # type: ignore[union-attr]
    # a group starts with broker id 1 only
    assert m.apply_broker_id(C, G, 2, f"{addr(2)};x").code == R.CONTROLLER_BROKER_ID_INVALID
    r = m.apply_broker_id(C, G, 1, f"{addr(1)};t1")
    assert r.code == R.SUCCESS and r.events == (ApplyBrokerIdEvent(C, G, addr(1), 1, f"{addr(1)};t1"),)
    apply(m, r)
    assert m.next_broker_id(C, G).header.next_broker_id == 2  # type: ignore[union-attr]
    # the same broker again (same check code) may; another with the id may not
    assert m.apply_broker_id(C, G, 1, f"{addr(1)};t1").code == R.SUCCESS
    assert m.apply_broker_id(C, G, 1, f"{addr(9)};t9").code == R.CONTROLLER_BROKER_ID_INVALID
    # registering: unknown group, unknown id; known, no master yet
    assert m.register_broker(C, "nobody", 1, addr(1), everyone).code == R.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert m.register_broker(C, G, 5, addr(5), everyone).code == R.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    r = m.register_broker(C, G, 1, addr(1), everyone)
    assert r.code == R.SUCCESS and r.events == () and r.header.master_broker_id is None  # type: ignore[union-attr]
    assert json.loads(r.body or b"") == {"syncStateSet": [], "syncStateSetEpoch": 0}
    # a new address is recorded by an event
    r = apply(m, m.register_broker(C, G, 1, addr(7), everyone))
    assert r.events == (UpdateBrokerAddressEvent(C, G, addr(7), 1),)
    assert m.replicas[G].address(1) == addr(7)
    # the first election makes the broker that asks master, whoever is alive
    r = apply(m, m.elect_master(G, 1, False, DefaultElectPolicy(only())))
    assert r.code == R.SUCCESS
    h = r.header
    assert (h.master_broker_id, h.master_address, h.master_epoch, h.sync_state_set_epoch) == (1, addr(7), 1, 1)  # type: ignore[union-attr]
    body = json.loads(r.body or b"")
    assert body["syncStateSet"] == [1] and body["brokerMemberGroup"]["brokerAddrs"] == {"1": addr(7)}
    s = m.sync_states[G]
    assert (s.master_broker_id, s.master_epoch, s.sync_state_set, s.sync_state_set_epoch) == (1, 1, {1}, 1)
    r = m.register_broker(C, G, 1, addr(7), everyone)
    assert (r.header.master_broker_id, r.header.master_epoch) == (1, 1)  # type: ignore[union-attr]


def test_alter_sync_state_set_checks_in_order() -> None:
    m = group(3)
    s = m.sync_states[G]
    me, se = s.master_epoch, s.sync_state_set_epoch
    assert (me, se, s.sync_state_set) == (1, 2, {1, 2, 3})

    def ask(master: int, mepoch: int, ids: set[int], sepoch: int, alive=everyone) -> int:  # type: ignore[no-untyped-def]
        return m.alter_sync_state_set(G, master, mepoch, SyncStateSet(frozenset(ids), sepoch), alive).code

    assert (
        m.alter_sync_state_set("nobody", 1, me, SyncStateSet(frozenset({1}), se), everyone).code
        == R.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    )
    assert ask(1, me, {1, 2, 3}, se) == R.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED  # no change
    assert ask(2, me, {1, 2}, se) == R.CONTROLLER_INVALID_MASTER
    assert ask(1, me - 1, {1, 2}, se) == R.CONTROLLER_FENCED_MASTER_EPOCH
    assert ask(1, me, {1, 2}, se - 1) == R.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
    assert ask(1, me, {1, 4}, se) == R.CONTROLLER_INVALID_REPLICAS
    assert ask(1, me, {1, 2}, se, only(1)) == R.CONTROLLER_BROKER_NOT_ALIVE
    assert ask(1, me, {2, 3}, se) == R.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED  # the master left out
    r = apply(m, m.alter_sync_state_set(G, 1, me, SyncStateSet(frozenset({1, 2}), se), everyone))
    assert r.code == R.SUCCESS and r.header.new_sync_state_set_epoch == se + 1  # type: ignore[union-attr]
    assert r.events == (AlterSyncStateSetEvent(G, frozenset({1, 2})),)
    assert (s.sync_state_set, s.sync_state_set_epoch, s.master_epoch) == ({1, 2}, se + 1, me)
    assert ask(1, me, {1}, se) == R.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH  # the old epoch is fenced now


def test_elect_prefers_the_sync_state_set_and_the_best_progress() -> None:
    m = group(3)
    hb = BrokerHeartbeatManager()
    for i, (epoch, offset) in {2: (1, 500), 3: (1, 900)}.items():
        hb.on_heartbeat(C, G, addr(i), i, 0, epoch=epoch, max_offset=offset)
    policy = DefaultElectPolicy(lambda c, n, i: hb.is_active(c, n, i, 100), hb.live_info)
    # the master (1) is silent: the controller's own election picks the furthest in-sync broker
    r = apply(m, m.elect_master(G, -1, False, policy))
    assert r.code == R.SUCCESS and r.header.master_broker_id == 3  # type: ignore[union-attr]
    s = m.sync_states[G]
    assert (s.master_broker_id, s.master_epoch, s.sync_state_set, s.sync_state_set_epoch) == (3, 2, {3}, 3)
    # the master is alive: nothing changes
    r = m.elect_master(G, -1, False, policy)
    assert r.code == R.CONTROLLER_MASTER_STILL_EXIST and r.events == ()
    assert (r.header.master_broker_id, r.header.master_epoch) == (3, 2)  # type: ignore[union-attr]
    # a designated broker outside the SyncStateSet is refused without unclean elections
    r = m.elect_master(G, 2, True, policy)
    assert r.code == R.CONTROLLER_ELECT_MASTER_FAILED and r.events == ()
    # designating the master itself changes nothing
    assert m.elect_master(G, 3, True, policy).code == R.CONTROLLER_MASTER_STILL_EXIST


def test_equal_progress_goes_by_priority_then_id() -> None:
    hb = BrokerHeartbeatManager()
    hb.on_heartbeat(C, G, addr(2), 2, 0, epoch=1, max_offset=5, election_priority=3)
    hb.on_heartbeat(C, G, addr(3), 3, 0, epoch=1, max_offset=5, election_priority=1)
    hb.on_heartbeat(C, G, addr(4), 4, 0, epoch=1, max_offset=5, election_priority=1)
    policy = DefaultElectPolicy(lambda c, n, i: hb.is_active(c, n, i, 0), hb.live_info)
    assert policy.elect(C, G, {2, 3, 4}, None, None, None) == 3
    assert policy.elect(C, G, {2, 3, 4}, None, 2, None) == 2  # an alive old master stays
    assert policy.elect(C, G, {2, 3, 4}, None, 2, 4) == 4  # unless another is designated
    assert policy.elect(C, G, {2, 3, 4}, None, None, 9) is None
    assert policy.elect(C, G, {7}, {2, 3}, None, None) == 3  # unclean: from everyone
    assert DefaultElectPolicy().elect(C, G, {5, 4}, None, None, None) == 4


def test_nobody_to_elect() -> None:
    m = group(3)
    dead = DefaultElectPolicy(only())
    # a broker's request fails and changes nothing
    r = m.elect_master(G, 2, False, dead)
    assert r.code == R.CONTROLLER_ELECT_MASTER_FAILED and r.events == ()
    # the controller's own election records that the master is gone, SyncStateSet kept
    r = apply(m, m.elect_master(G, -1, False, dead))
    assert r.code == R.CONTROLLER_MASTER_NOT_AVAILABLE and r.events == (ElectMasterEvent(G, False),)
    s = m.sync_states[G]
    assert (s.master_broker_id, s.master_epoch, s.sync_state_set) == (None, 2, {1, 2, 3})
    # broker 2 comes back: it is in the SyncStateSet, so it may lead
    r = apply(m, m.elect_master(G, -1, False, DefaultElectPolicy(only(2))))
    assert r.code == R.SUCCESS and (s.master_broker_id, s.master_epoch) == (2, 3)


def test_unclean_election_only_when_enabled() -> None:
    for unclean, expected in ((False, None), (True, 3)):
        m = group(3, unclean=unclean)
        s = m.sync_states[G]
        apply(
            m,
            m.alter_sync_state_set(
                G, 1, s.master_epoch, SyncStateSet(frozenset({1}), s.sync_state_set_epoch), everyone
            ),
        )
        r = apply(m, m.elect_master(G, -1, False, DefaultElectPolicy(only(3))))
        assert s.master_broker_id == expected, r


def test_replica_info_and_sync_state_data() -> None:
    m = group(2)
    assert m.replica_info("nobody").code == R.CONTROLLER_BROKER_METADATA_NOT_EXIST
    r = m.replica_info(G)
    h = r.header
    assert (h.master_broker_id, h.master_address, h.master_epoch) == (1, addr(1), 1)  # type: ignore[union-attr]
    assert json.loads(r.body or b"") == {"syncStateSet": [1, 2], "syncStateSetEpoch": 2}
    data = json.loads(m.sync_state_data([G, "nobody"], only(1)).body or b"")
    info = data["replicasInfoTable"][G]
    assert list(data["replicasInfoTable"]) == [G]
    assert info["masterBrokerId"] == 1 and info["masterEpoch"] == 1
    assert [(x["brokerId"], x["alive"]) for x in info["inSyncReplicas"]] == [(1, True), (2, False)]
    assert info["notInSyncReplicas"] == []


def test_clean_broker_data() -> None:
    m = group(3)
    clean = m.clean_broker_data
    assert clean(C, G, None, False, everyone).code == R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA  # master alive
    assert clean(C, G, "2;x", False, everyone).code == R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert clean(C, G, "2", False, everyone).code == R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA  # still alive
    assert clean(C, "nobody", None, True, everyone).code == R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    r = apply(m, clean(C, G, "2;3", False, only(1)))
    assert r.events == (CleanBrokerDataEvent(G, frozenset({2, 3})),)
    assert set(m.replicas[G].brokers) == {1} and m.sync_states[G].sync_state_set == {1}
    apply(m, clean(C, G, None, True, everyone))  # the whole group, living or not
    assert G not in m.replicas and G not in m.sync_states


def test_need_reelect() -> None:
    m = group(3)
    assert m.need_reelect(everyone) == []
    assert m.need_reelect(only(2)) == [G]
    assert m.need_reelect(only()) == []  # nobody alive to take over


@pytest.mark.parametrize(
    "event",
    [
        AlterSyncStateSetEvent(G, frozenset({1, 2})),
        ApplyBrokerIdEvent(C, G, addr(1), 1, f"{addr(1)};1"),
        ElectMasterEvent(G, True, 2),
        ElectMasterEvent(G, False),
        UpdateBrokerAddressEvent(C, G, addr(2), 2),
        CleanBrokerDataEvent(G),
        CleanBrokerDataEvent(G, frozenset({3})),
    ],
)
def test_events_round_trip(event: object) -> None:
    data = encode_event(event)  # type: ignore[arg-type]
    assert decode_event(data) == event


def test_event_layout_is_rocketmqs() -> None:
    data = encode_event(ElectMasterEvent(G, True, 2))
    assert data[:2] == b"\x00\x03"
    assert json.loads(data[2:]) == {"brokerName": G, "newMasterElected": True, "newMasterBrokerId": 2}
    assert decode_event(b"") is None
    for bad in (b"\x00", b"\x00\x09{}", b"\x00\x01[]", b'\x00\x01{"brokerName":"a"}', b"\x00\x02not json"):
        with pytest.raises(EventError):
            decode_event(bad)


def test_heartbeats() -> None:
    hb = BrokerHeartbeatManager()
    hb.on_heartbeat(C, G, addr(1), 1, 1000, timeout_ms=500, epoch=2, max_offset=10)
    assert hb.is_active(C, G, 1, 1500) and not hb.is_active(C, G, 1, 1501)
    hb.on_heartbeat(C, G, addr(1), 1, 1200, timeout_ms=500, epoch=1, max_offset=99)  # older epoch: progress kept
    info = hb.live_info(C, G, 1)
    assert info is not None and (info.epoch, info.max_offset, info.last_update_ms) == (2, 10, 1200)
    hb.on_heartbeat(C, G, addr(2), 2, 1200, channel="conn")
    assert hb.scan(1701) == [(C, G, 1)] and hb.live_info(C, G, 1) is None
    assert hb.is_active(C, G, 2, 1200 + 10_000)  # the default timeout
    assert hb.on_channel_close("conn") == [(C, G, 2)]

"""A deterministic simulation of a controller group: tests/raft/sim.py's Raft members (drops,
delays, duplicates, partitions, crashes, power failures, drifting clocks), each applying its
committed log to a ReplicasInfoManager, and broker groups whose brokers beat every
controller member, die (half the time with their connections closing, which makes them
inactive on every member at once, as BrokerHousekeepingService does), come back and lose
their links to members.

The leader (once it has applied its own term's first entry, and with nothing of its own in
flight, as RocketMQ's controller serialises its requests) answers requests from its applied
state and proposes their events: brokers applying for ids and registering, the controller's
own election when a master's heartbeats stop, a broker asking to be elected, the master
shrinking or growing its SyncStateSet (sometimes with stale epochs).

Checked on every apply on every member: a new master comes from the SyncStateSet (from the
group's brokers with enableElectUncleanMaster, every third seed); a group's master epoch and
SyncStateSet epoch only increase; one master per group and master epoch; and every member
that has applied the log up to an index holds the same state there. At the end (after a heal
phase): a leader, every member caught up, and every group with a master.
"""

from __future__ import annotations

from typing import Any

from rmq.controller.elect import DefaultElectPolicy
from rmq.controller.events import ElectMasterEvent, decode_event, encode_event
from rmq.controller.heartbeat import BrokerHeartbeatManager
from rmq.controller.replicas import ReplicasInfoManager, Result
from rmq.protocol.bodies.controller import SyncStateSet
from rmq.raft.core import NotLeader

from ..raft.sim import Faults, InvariantViolated, Member, Sim

CLUSTER = "SimCluster"
GROUPS = ("g0", "g1")
BROKERS = (1, 2, 3)
BEAT_MS = 50
BROKER_TIMEOUT_MS = 300


class ControllerSim(Sim):
    def __init__(self, seed: int, n: int = 3) -> None:
        self.unclean = seed % 3 == 0
        self.managers: dict[str, ReplicasInfoManager] = {}
        self.heartbeats: dict[str, BrokerHeartbeatManager] = {}
        self.applied: dict[str, int] = {}
        self.states_at: dict[int, tuple[object, ...]] = {}  # applied index -> the state there
        self.masters: dict[tuple[str, int], int | None] = {}  # (group, master epoch) -> master
        self.broker_up: dict[tuple[str, int], bool] = {(g, b): True for g in GROUPS for b in BROKERS}
        self.offsets: dict[tuple[str, int], int] = {(g, b): 0 for g in GROUPS for b in BROKERS}
        self.cut: set[tuple[str, int, str]] = set()  # (group, broker, member): beats lost
        # each broker's connection (a new one when it comes back): what a member's table holds
        self.channels: dict[tuple[str, int], object] = {key: object() for key in self.broker_up}
        self.closes = 0
        self.requests: dict[str, int] = {}
        super().__init__(seed, n, Faults(retention_rate=0.0), fault_ms=8000, heal_ms=4000)
        self._at(7, "beats", None)

    # -- members ---------------------------------------------------------------------------------

    def _start(self, m: Member) -> None:
        super()._start(m)
        self.managers[m.id] = ReplicasInfoManager(enable_elect_unclean_master=self.unclean)
        self.heartbeats[m.id] = BrokerHeartbeatManager()
        self.applied[m.id] = -1

    def _commit(self, m: Member, index: int) -> None:
        super()._commit(m, index)
        manager = self.managers[m.id]
        for i in range(self.applied[m.id] + 1, m.committed + 1):
            e = m.memory.entry_at(i)
            assert e is not None  # no retention here: a member replays its log from the start
            event = decode_event(e.body)
            if event is not None:
                self._check_and_apply(m.id, manager, event)
            self.applied[m.id] = i
            state = manager.snapshot()
            seen = self.states_at.setdefault(i, state)
            if seen != state:
                raise InvariantViolated(f"{m.id} holds another state than a member before it at index {i}")

    def _check_and_apply(self, mid: str, manager: ReplicasInfoManager, event: Any) -> None:
        before = {g: (s.master_epoch, s.sync_state_set_epoch) for g, s in manager.sync_states.items()}
        if isinstance(event, ElectMasterEvent) and event.new_master_elected:
            s = manager.sync_states.get(event.broker_name)
            r = manager.replicas.get(event.broker_name)
            if s is not None and r is not None and s.master_epoch > 0:
                allowed = set(r.brokers) if self.unclean else s.sync_state_set
                if event.new_master_broker_id not in allowed:
                    raise InvariantViolated(
                        f"{mid}: master {event.new_master_broker_id} of {event.broker_name} elected from outside "
                        f"{sorted(allowed)}"
                    )
        manager.apply(event)
        for g, s in manager.sync_states.items():
            old = before.get(g, (0, 0))
            if s.master_epoch < old[0] or s.sync_state_set_epoch < old[1]:
                raise InvariantViolated(
                    f"{mid}: epochs of {g} went back from {old} to {s.master_epoch, s.sync_state_set_epoch}"
                )
            # A master epoch names one master (or none): a change of master is a new epoch.
            holder = self.masters.setdefault((g, s.master_epoch), s.master_broker_id)
            if holder != s.master_broker_id:
                raise InvariantViolated(f"{g} has masters {holder} and {s.master_broker_id} in epoch {s.master_epoch}")

    # -- brokers ---------------------------------------------------------------------------------

    def _step(self, kind: str, payload: Any) -> None:
        if kind == "beats":
            self._beats()
            self._at(self.now + BEAT_MS, "beats", None)
        else:
            super()._step(kind, payload)

    def _beats(self) -> None:
        for (g, b), up in self.broker_up.items():
            if not up:
                continue
            self.offsets[g, b] += self.rng.randrange(0, 100)
            for m in self.members.values():
                if m.node is None or (g, b, m.id) in self.cut:
                    continue
                s = self.managers[m.id].sync_states.get(g)
                epoch = s.master_epoch if s is not None else 0
                self.heartbeats[m.id].on_heartbeat(
                    CLUSTER, g, f"{g}-{b}", b, self._local(m), timeout_ms=BROKER_TIMEOUT_MS, epoch=epoch,
                    max_offset=self.offsets[g, b], election_priority=self.rng.randrange(3),
                    channel=self.channels[g, b],
                )  # fmt: skip

    def _chaos(self) -> None:
        super()._chaos()
        if self._healing():
            for key in self.broker_up:
                self.broker_up[key] = True
            self.cut.clear()
            return
        if self.rng.random() < 0.05:
            key = self.rng.choice(list(self.broker_up))
            self.broker_up[key] = not self.broker_up[key]
            if self.broker_up[key]:
                self.channels[key] = object()
            elif self.rng.random() < 0.5:  # its connections close: inactive at once, not after the timeout
                self.closes += 1
                for hb in self.heartbeats.values():
                    hb.on_channel_close(self.channels[key])
        if self.rng.random() < 0.03:
            self.cut = {(g, b, i) for g in GROUPS for b in BROKERS for i in self.ids if self.rng.random() < 0.2}

    # -- requests ----------------------------------------------------------------------------

    def _client(self) -> None:
        for m in self.members.values():
            node = m.node
            if node is None or not node.is_leader:
                continue
            applied = self.applied[m.id]
            # ready: its own term's first entry applied, nothing of its own in flight
            if applied < 0 or m.memory.term_at(applied) != node.term or m.memory.end_index != applied:
                continue
            result = self._request(m)
            for event in result.events:
                try:
                    _, actions = node.propose(encode_event(event), self._local(m))
                except NotLeader:
                    return
                self._run_actions(m, actions)

    def _request(self, m: Member) -> Result:
        manager, hb, now = self.managers[m.id], self.heartbeats[m.id], self._local(m)

        def alive(cluster: str, group: str, broker: int) -> bool:
            return hb.is_active(cluster, group, broker, now)

        policy = DefaultElectPolicy(alive, hb.live_info)
        rng = self.rng
        stale = manager.need_reelect(alive)
        if stale:
            return self._count("reelect", manager.elect_master(stale[0], -1, False, policy))
        g, b = rng.choice(GROUPS), rng.choice(BROKERS)
        replicas, state = manager.replicas.get(g), manager.sync_states.get(g)
        if not self.broker_up[g, b]:
            return Result()
        if replicas is None or b not in replicas.brokers:
            nxt = manager.next_broker_id(CLUSTER, g).header
            applied_id = getattr(nxt, "next_broker_id", 1)
            return self._count("apply", manager.apply_broker_id(CLUSTER, g, applied_id, f"{g}-{applied_id};{b}"))
        assert state is not None
        roll = rng.random()
        if roll < 0.15:
            return self._count("register", manager.register_broker(CLUSTER, g, b, f"{g}-{b}", alive))
        if roll < 0.35 or state.master_broker_id is None:
            return self._count("elect", manager.elect_master(g, b, rng.random() < 0.3, policy))
        master = state.master_broker_id
        if not self.broker_up[g, master]:
            return Result()
        ids = {master} | {x for x in replicas.brokers if rng.random() < 0.5}
        mepoch, sepoch = state.master_epoch, state.sync_state_set_epoch
        if rng.random() < 0.2:
            mepoch -= rng.randrange(2)
            sepoch -= rng.randrange(2)
        return self._count(
            "alter", manager.alter_sync_state_set(g, master, mepoch, SyncStateSet(frozenset(ids), sepoch), alive)
        )

    def _count(self, kind: str, result: Result) -> Result:
        key = f"{kind}:{result.code}"
        self.requests[key] = self.requests.get(key, 0) + 1
        return result

    # -- the end -----------------------------------------------------------------------------

    def _final_checks(self) -> None:
        nodes = [m for m in self.members.values() if m.node is not None]
        leaders = [m for m in nodes if m.node is not None and m.node.is_leader]
        if not leaders:
            raise InvariantViolated("no leader after healing")
        for m in nodes:
            if self.applied[m.id] < self.healed_commit:
                raise InvariantViolated(
                    f"{m.id} applied only to {self.applied[m.id]}, {self.healed_commit} was committed"
                )
        manager = self.managers[leaders[0].id]
        for g in GROUPS:
            s = manager.sync_states.get(g)
            if s is None or s.master_broker_id is None:
                raise InvariantViolated(f"{g} has no master after healing: {s}")


def run_seed(seed: int, n: int = 3) -> ControllerSim:
    try:
        sim = ControllerSim(seed, n)
        sim.run()
        return sim
    except InvariantViolated as exc:
        raise InvariantViolated(f"seed {seed} ({n} nodes): {exc} -- replay: CONTROLLER_SEED={seed}") from exc

"""ReplicasInfoManager: the controller's state per broker group, as a sans-IO state machine.

Per brokerName: the brokers (id -> address and register check code, the next id to hand
out) and the SyncStateInfo (master id, master epoch, the SyncStateSet and its epoch).

Two halves, as in RocketMQ. A request (``alter_sync_state_set``, ``elect_master``,
``apply_broker_id``, ``register_broker``, ``clean_broker_data``, and the reads) looks at the
state and gives a ``Result``: the answer (code, remark, header, body) and the events that
carry its change out. The state changes only by ``apply``, which every member runs on the
events its Raft log commits, in log order. Whether a broker is alive is asked of an
``alive`` predicate (the heartbeat table, at the time of the request), so the same events
give the same state on every member.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from rmq.protocol import ResponseCode
from rmq.protocol.bodies.controller import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
)
from rmq.protocol.body import dumps
from rmq.protocol.headers import (
    AlterSyncStateSetResponseHeader,
    ElectMasterResponseHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoResponseHeader,
    Header,
    RegisterBrokerToControllerResponseHeader,
)

from .elect import Alive, DefaultElectPolicy
from .events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    Event,
    UpdateBrokerAddressEvent,
)

FIRST_BROKER_CONTROLLER_ID = 1  # MixAll.FIRST_BROKER_CONTROLLER_ID
R = ResponseCode


@dataclass(slots=True)
class BrokerReplicaInfo:
    cluster_name: str
    broker_name: str
    next_assign_broker_id: int = FIRST_BROKER_CONTROLLER_ID
    brokers: dict[int, tuple[str, str]] = field(default_factory=dict)  # id -> (address, registerCheckCode)

    def address(self, broker_id: int | None) -> str | None:
        entry = self.brokers.get(broker_id) if broker_id is not None else None
        return None if entry is None else entry[0]


@dataclass(slots=True)
class SyncStateInfo:
    cluster_name: str
    broker_name: str
    master_epoch: int = 0
    sync_state_set_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()
    master_broker_id: int | None = None


@dataclass(frozen=True, slots=True)
class Result:
    """A request's answer and the events that make its change (none for a refusal or a read)."""

    code: int = ResponseCode.SUCCESS
    remark: str | None = None
    header: Header | None = None
    body: bytes | None = None
    events: tuple[Event, ...] = ()


def _refuse(code: int, remark: str, header: Header | None = None) -> Result:
    return Result(code, remark, header)


def _sync_state_body(info: SyncStateInfo) -> bytes:
    return dumps(SyncStateSet(info.sync_state_set, info.sync_state_set_epoch).to_json())


class ReplicasInfoManager:
    def __init__(self, *, enable_elect_unclean_master: bool = False) -> None:
        self.enable_elect_unclean_master = enable_elect_unclean_master
        self.replicas: dict[str, BrokerReplicaInfo] = {}
        self.sync_states: dict[str, SyncStateInfo] = {}

    def _known(self, broker_name: str) -> bool:
        return broker_name in self.replicas and broker_name in self.sync_states

    # -- requests ------------------------------------------------------------------------------

    def alter_sync_state_set(
        self,
        broker_name: str,
        master_broker_id: int,
        master_epoch: int,
        new: SyncStateSet,
        alive: Alive,
    ) -> Result:
        if not self._known(broker_name):
            return _refuse(R.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed")
        state, replicas = self.sync_states[broker_name], self.replicas[broker_name]
        wanted = new.sync_state_set
        if wanted == state.sync_state_set:
            return _refuse(
                R.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "The newSyncStateSet is equal with oldSyncStateSet"
            )
        if state.master_broker_id is None or state.master_broker_id != master_broker_id:
            return _refuse(
                R.CONTROLLER_INVALID_MASTER,
                f"the current master is {state.master_broker_id}, not {master_broker_id}",
            )
        if master_epoch != state.master_epoch:
            return _refuse(
                R.CONTROLLER_FENCED_MASTER_EPOCH,
                f"the current master epoch is {state.master_epoch}, not {master_epoch}",
            )
        if new.sync_state_set_epoch != state.sync_state_set_epoch:
            return _refuse(
                R.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                f"the current syncStateSet epoch is {state.sync_state_set_epoch}, not {new.sync_state_set_epoch}",
            )
        for replica in sorted(wanted):
            if replica not in replicas.brokers:
                return _refuse(R.CONTROLLER_INVALID_REPLICAS, f"the replica {replica} does not exist")
            if not alive(replicas.cluster_name, broker_name, replica):
                return _refuse(R.CONTROLLER_BROKER_NOT_ALIVE, f"the replica {replica} is not alive")
        if state.master_broker_id not in wanted:
            return _refuse(
                R.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                f"the newSyncStateSet does not hold the master {state.master_broker_id}",
            )
        epoch = state.sync_state_set_epoch + 1
        return Result(
            header=AlterSyncStateSetResponseHeader(new_sync_state_set_epoch=epoch),
            body=dumps(SyncStateSet(wanted, epoch).to_json()),
            events=(AlterSyncStateSetEvent(broker_name, wanted),),
        )

    def elect_master(
        self,
        broker_name: str,
        broker_id: int | None,
        designate_elect: bool,
        policy: DefaultElectPolicy,
    ) -> Result:
        """``broker_id`` None or -1: the controller's own election (a master's heartbeats
        stopped); otherwise a broker asks, for itself when ``designate_elect``."""
        if not self._known(broker_name):
            return _refuse(R.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered")
        state, replicas = self.sync_states[broker_name], self.replicas[broker_name]
        old = state.master_broker_id
        every = set(replicas.brokers) if self.enable_elect_unclean_master else None
        new: int | None = None
        if state.master_epoch == 0:  # never had a master: the broker that asks is the first
            new = broker_id
        if new is None or new == -1:
            prefer = broker_id if designate_elect else None
            new = policy.elect(replicas.cluster_name, broker_name, state.sync_state_set, every, old, prefer)
        if new is not None and new == old:
            return Result(
                R.CONTROLLER_MASTER_STILL_EXIST,
                f"the master {old} of {broker_name} is still alive",
                ElectMasterResponseHeader(old, replicas.address(old), state.master_epoch, state.sync_state_set_epoch),
                dumps(ElectMasterResponseBody(state.sync_state_set).to_json()),
            )
        if new is not None:
            group = BrokerMemberGroup(
                replicas.cluster_name, broker_name, {i: a for i, (a, _) in sorted(replicas.brokers.items())}
            )
            return Result(
                header=ElectMasterResponseHeader(
                    new, replicas.address(new), state.master_epoch + 1, state.sync_state_set_epoch + 1
                ),
                body=dumps(ElectMasterResponseBody(frozenset({new}), group).to_json()),
                events=(ElectMasterEvent(broker_name, True, new),),
            )
        if broker_id is None or broker_id == -1:
            # The controller's own election found nobody: record that the master is gone.
            return Result(
                R.CONTROLLER_MASTER_NOT_AVAILABLE,
                "Old master has down and failed to elect a new broker master",
                events=(ElectMasterEvent(broker_name, False),),
            )
        return _refuse(R.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master")

    def next_broker_id(self, cluster_name: str, broker_name: str) -> Result:
        replicas = self.replicas.get(broker_name)
        nxt = FIRST_BROKER_CONTROLLER_ID if replicas is None else replicas.next_assign_broker_id
        return Result(header=GetNextBrokerIdResponseHeader(cluster_name, broker_name, nxt))

    def apply_broker_id(self, cluster_name: str, broker_name: str, broker_id: int, register_check_code: str) -> Result:
        address = register_check_code.split(";")[0]
        event = ApplyBrokerIdEvent(cluster_name, broker_name, address, broker_id, register_check_code)
        replicas = self.replicas.get(broker_name)
        if replicas is None:
            if broker_id == FIRST_BROKER_CONTROLLER_ID:
                return Result(events=(event,))
            return _refuse(
                R.CONTROLLER_BROKER_ID_INVALID,
                f"Broker-set: {broker_name} hasn't been registered in controller, but broker try to apply brokerId: "
                f"{broker_id}",
            )
        held = replicas.brokers.get(broker_id)
        if held is None or held[1] == register_check_code:
            return Result(events=(event,))
        return _refuse(
            R.CONTROLLER_BROKER_ID_INVALID, f"Fail to apply brokerId: {broker_id} in broker-set: {broker_name}"
        )

    def register_broker(
        self, cluster_name: str, broker_name: str, broker_id: int, broker_address: str, alive: Alive
    ) -> Result:
        header = RegisterBrokerToControllerResponseHeader(cluster_name, broker_name)
        if not self._known(broker_name):
            return _refuse(
                R.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"Broker-set: {broker_name} hasn't been registered in controller",
                header,
            )
        state, replicas = self.sync_states[broker_name], self.replicas[broker_name]
        if broker_id not in replicas.brokers:
            return _refuse(
                R.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"BrokerId: {broker_id} hasn't been registered in broker-set: {broker_name}",
                header,
            )
        master = state.master_broker_id
        if master is not None and alive(cluster_name, broker_name, master):
            header.master_broker_id = master
            header.master_address = replicas.address(master)
            header.master_epoch = state.master_epoch
            header.sync_state_set_epoch = state.sync_state_set_epoch
        events: tuple[Event, ...] = ()
        if replicas.address(broker_id) != broker_address:
            events = (UpdateBrokerAddressEvent(cluster_name, broker_name, broker_address, broker_id),)
        return Result(header=header, body=_sync_state_body(state), events=events)

    def replica_info(self, broker_name: str) -> Result:
        if not self._known(broker_name):
            return _refuse(R.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
        state, replicas = self.sync_states[broker_name], self.replicas[broker_name]
        master = state.master_broker_id
        return Result(
            header=GetReplicaInfoResponseHeader(master, replicas.address(master), state.master_epoch),
            body=_sync_state_body(state),
        )

    def sync_state_data(self, broker_names: Iterable[str], alive: Alive) -> Result:
        table: dict[str, ReplicasInfo] = {}
        for name in broker_names:
            if not self._known(name):
                continue
            state, replicas = self.sync_states[name], self.replicas[name]
            in_sync: list[ReplicaIdentity] = []
            not_in_sync: list[ReplicaIdentity] = []
            for broker_id, (address, _) in sorted(replicas.brokers.items()):
                ident = ReplicaIdentity(name, broker_id, address, alive(replicas.cluster_name, name, broker_id))
                (in_sync if broker_id in state.sync_state_set else not_in_sync).append(ident)
            table[name] = ReplicasInfo(
                state.master_broker_id, replicas.address(state.master_broker_id), state.master_epoch,
                state.sync_state_set_epoch, tuple(in_sync), tuple(not_in_sync),
            )  # fmt: skip
        return Result(body=dumps(BrokerReplicasInfo(table).to_json()))

    def clean_broker_data(
        self, cluster_name: str | None, broker_name: str, ids_to_clean: str | None, clean_living: bool, alive: Alive
    ) -> Result:
        ids: frozenset[int] | None = None
        if not clean_living:
            state = self.sync_states.get(broker_name)
            if not ids_to_clean and state is not None and state.master_broker_id is not None:
                return _refuse(
                    R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, f"Broker {broker_name} is still alive, clean up failure"
                )
        if ids_to_clean:
            try:
                ids = frozenset(int(i) for i in ids_to_clean.split(";"))
            except ValueError as exc:
                return _refuse(
                    R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                    f"Please set the option <brokerControllerIdsToClean> according to the format, exception: {exc}",
                )
            if not clean_living:
                for i in sorted(ids):
                    if alive(cluster_name or "", broker_name, i):
                        return _refuse(
                            R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                            f"Broker [{broker_name}, {i}] is still alive, clean up failure",
                        )
        if self._known(broker_name):
            return Result(events=(CleanBrokerDataEvent(broker_name, ids),))
        return _refuse(
            R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
            f"Broker {broker_name} is not existed,clean broker data failure.",
        )

    def need_reelect(self, alive: Alive) -> list[str]:
        """Groups whose master is not alive while another of their brokers is."""
        out = []
        for name, state in sorted(self.sync_states.items()):
            master = state.master_broker_id
            if master is None or alive(state.cluster_name, name, master):
                continue
            replicas = self.replicas.get(name)
            if replicas is not None and any(alive(state.cluster_name, name, i) for i in replicas.brokers):
                out.append(name)
        return out

    # -- the state machine ----------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        if isinstance(event, AlterSyncStateSetEvent):
            if self._known(event.broker_name):
                state = self.sync_states[event.broker_name]
                state.sync_state_set = event.new_sync_state_set
                state.sync_state_set_epoch += 1
        elif isinstance(event, ApplyBrokerIdEvent):
            replicas = self.replicas.get(event.broker_name)
            if replicas is None or event.broker_name not in self.sync_states:
                replicas = self.replicas[event.broker_name] = BrokerReplicaInfo(event.cluster_name, event.broker_name)
                self.sync_states[event.broker_name] = SyncStateInfo(event.cluster_name, event.broker_name)
            if event.new_broker_id not in replicas.brokers:
                replicas.brokers[event.new_broker_id] = (event.broker_address, event.register_check_code)
                replicas.next_assign_broker_id += 1
        elif isinstance(event, ElectMasterEvent):
            if self._known(event.broker_name):
                state = self.sync_states[event.broker_name]
                state.master_epoch += 1
                if event.new_master_elected and event.new_master_broker_id is not None:
                    state.master_broker_id = event.new_master_broker_id
                    state.sync_state_set = frozenset({event.new_master_broker_id})
                    state.sync_state_set_epoch += 1
                else:  # the master is gone, nobody took over: keep the SyncStateSet
                    state.master_broker_id = None
        elif isinstance(event, UpdateBrokerAddressEvent):
            replicas = self.replicas.get(event.broker_name)
            if replicas is not None and event.broker_id in replicas.brokers:
                _, code = replicas.brokers[event.broker_id]
                replicas.brokers[event.broker_id] = (event.broker_address, code)
        else:
            self._clean(event)

    def _clean(self, event: CleanBrokerDataEvent) -> None:
        name, ids = event.broker_name, event.broker_id_set_to_clean
        if not ids:
            self.replicas.pop(name, None)
            self.sync_states.pop(name, None)
            return
        if not self._known(name):
            return
        replicas, state = self.replicas[name], self.sync_states[name]
        for i in ids:
            replicas.brokers.pop(i, None)
        state.sync_state_set = state.sync_state_set - ids
        if not replicas.brokers:
            del self.replicas[name]
        if not state.sync_state_set:
            del self.sync_states[name]

    def snapshot(self) -> tuple[object, ...]:
        """The whole state as comparable values (tests compare members with it)."""
        return (
            tuple(sorted((k, v.cluster_name, v.next_assign_broker_id, tuple(sorted(v.brokers.items())))
                         for k, v in self.replicas.items())),
            tuple(sorted((k, v.cluster_name, v.master_epoch, v.sync_state_set_epoch, tuple(sorted(v.sync_state_set)),
                          v.master_broker_id) for k, v in self.sync_states.items())),
        )  # fmt: skip

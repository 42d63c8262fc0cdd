"""ControllerServer: one member of a controller group on Trio.

    async with ControllerServer(config) as controller:    # serving once this returns
        ...

A DLedger member (rmq.dledger) replicates the controller's events; the member's port (its
entry in controllerDLegerPeers) serves the Raft messages and the controller's requests, as
RocketMQ's controller serves both on its DLedger server. Every member applies its committed
entries in order to its ReplicasInfoManager, the ones on disk first at start (there are no
snapshots: the log is the state).

Only the leader answers the controller's requests, once it has applied its own term's first
entry (a new leader first learns everything committed before it), one at a time, as
RocketMQ's EventScheduler does: the request is looked at against the applied state, its
events are proposed, and the answer goes out once they are applied. Any other member
answers CONTROLLER_NOT_LEADER, naming the leader it knows (CONTROLLER_GET_METADATA_INFO
tells it too). BROKER_HEARTBEAT, CONTROLLER_GET_METADATA_INFO, GET_CONTROLLER_CONFIG and
UPDATE_CONTROLLER_CONFIG are answered by every member: each keeps its own heartbeat table and
its own settings (an update changes the member it is sent to; mqadmin sends it to each).

A broker whose connection to a member closes is inactive on that member at once, as
RocketMQ's BrokerHousekeepingService has it, without waiting for its heartbeats to time out.

The leader elects a new master for a group whose master's connection closes, or whose
master's heartbeats stop (a scan every scanNotActiveBrokerInterval for brokers gone silent,
and every scanInactiveMasterInterval for groups whose master is not alive while another
broker is), and with notifyBrokerRoleChanged tells the group's alive brokers
(NOTIFY_BROKER_ROLE_CHANGED, oneway).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import trio

from rmq.dledger.node import DLedgerNode, NodeConfig
from rmq.lifetime import Service
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import javaprops as properties
from rmq.protocol.bodies.controller import SyncStateSet
from rmq.protocol.body import dumps, loads
from rmq.protocol.errors import BodyError
from rmq.protocol.headers import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ClusterBrokerResponseHeader,
    ElectMasterRequestHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    NotifyBrokerRoleChangedRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from rmq.raft.core import NotLeader, RaftConfig
from rmq.remoting import Connection, RemotingClient, RemotingError
from rmq.remoting.dispatcher import Dispatcher
from rmq.rocketmq_keys import ConfigError

from .config import ControllerConfig
from .elect import DefaultElectPolicy
from .events import decode_event, encode_event
from .heartbeat import BrokerHeartbeatManager
from .replicas import ReplicasInfoManager, Result

log = logging.getLogger("rmq.controller")

WAIT_TIMEOUT = 5.0  # seconds a request waits for its events to be applied (RocketMQ's WAIT_TIMEOUT_OUT)
READY_WAIT = 1.0  # seconds a request waits for a new leader to catch up before NOT_LEADER
NOTIFY_TIMEOUT = 3.0


class ControllerServer(Service):
    def __init__(self, config: ControllerConfig, *, clock_ms: Callable[[], int] | None = None) -> None:
        config.validate()
        self.config = config
        self._clock_ms = clock_ms or (lambda: int(time.monotonic() * 1000))
        self.replicas = ReplicasInfoManager(enable_elect_unclean_master=config.enable_elect_unclean_master)
        self.heartbeats = BrokerHeartbeatManager()
        self.policy = DefaultElectPolicy(self._alive, self.heartbeats.live_info)
        self.dispatcher = Dispatcher()
        raft = RaftConfig(
            election_timeout_ms=config.election_timeout_ms,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            push_timeout_ms=config.heartbeat_interval_ms,
        )
        node_config = NodeConfig(
            self_id=config.self_id, peers=dict(config.peers), store=config.store_dir, group=config.group,
            bind_host=config.bind_address, raft=raft, data_file_size=config.mapped_file_size, sync_flush=True,
        )  # fmt: skip
        self.node = DLedgerNode(
            node_config, on_commit=self._on_commit, serve_appends=False, dispatcher=self.dispatcher,
            on_close=self._connection_closed,
        )  # fmt: skip
        self.applied = -1
        self._applied = trio.Event()
        self._lock = trio.Lock()  # one request at a time (RocketMQ's EventScheduler)
        self._client: RemotingClient | None = None
        self._nursery: trio.Nursery | None = None
        self._stopped = trio.Event()
        self._register()
        self._replay()

    # -- the state machine -------------------------------------------------------------------

    def _replay(self) -> None:
        """Apply what the log held committed at start."""
        dlog = self.node.dlog
        if dlog.begin_index > 0:
            log.warning("the controller log starts at index %d: the state before it is lost", dlog.begin_index)
        self.applied = dlog.begin_index - 1
        self._apply_upto(self.node.core.commit_index)

    def _on_commit(self, index: int) -> None:
        self._apply_upto(index)
        applied, self._applied = self._applied, trio.Event()
        applied.set()

    def _apply_upto(self, index: int) -> None:
        node = self.node
        for i in range(self.applied + 1, index + 1):
            cached = node.recent.get(i)
            body = cached.body if cached is not None else node.dlog.entry(i).body
            event = decode_event(body)
            if event is not None:
                self.replicas.apply(event)
            self.applied = i

    @property
    def leading(self) -> bool:
        """The leader, caught up with everything committed before its term."""
        core = self.node.core
        return core.is_leader and self.applied >= 0 and self.node.dlog.term_at(self.applied) == core.term

    def _alive(self, cluster: str, broker_name: str, broker_id: int) -> bool:
        return self.heartbeats.is_active(cluster, broker_name, broker_id, self._clock_ms())

    # -- requests ------------------------------------------------------------------------------

    def _register(self) -> None:
        d = self.dispatcher
        d.register(RequestCode.BROKER_HEARTBEAT, self._on_heartbeat, inline=True)
        d.register(RequestCode.CONTROLLER_GET_METADATA_INFO, self._on_metadata, inline=True)
        d.register(RequestCode.GET_CONTROLLER_CONFIG, self._on_get_config, inline=True)
        d.register(RequestCode.UPDATE_CONTROLLER_CONFIG, self._on_update_config, inline=True)
        d.register(
            (
                RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, RequestCode.CONTROLLER_ELECT_MASTER,
                RequestCode.CONTROLLER_REGISTER_BROKER, RequestCode.CONTROLLER_GET_REPLICA_INFO,
                RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, RequestCode.CLEAN_BROKER_DATA,
                RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, RequestCode.CONTROLLER_APPLY_BROKER_ID,
            ),
            self._on_request,
            concurrency=16,
            queue_size=50_000,
        )  # fmt: skip

    def _not_leader(self, request: RemotingCommand) -> RemotingCommand:
        leader = self.node.core.leader_id
        where = f"{leader} ({self.config.peers[leader]})" if leader in self.config.peers else "unknown"
        return request.make_response(
            ResponseCode.CONTROLLER_NOT_LEADER, f"The controller is not in leader state; leader: {where}"
        )

    def _compute(self, request: RemotingCommand) -> Result:
        """The request against the applied state (the caller holds the lock and leads)."""
        ext, code, m = request.ext_fields, request.code, self.replicas
        if code == RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET:
            a = AlterSyncStateSetRequestHeader.from_ext(ext)
            try:
                wanted = SyncStateSet.from_json(loads(request.body))
            except (BodyError, ValueError) as exc:
                return Result(ResponseCode.CONTROLLER_INVALID_REQUEST, f"bad SyncStateSet body: {exc}")
            return m.alter_sync_state_set(a.broker_name, a.master_broker_id, a.master_epoch, wanted, self._alive)
        if code == RequestCode.CONTROLLER_ELECT_MASTER:
            e = ElectMasterRequestHeader.from_ext(ext)
            return m.elect_master(e.broker_name, e.broker_id, e.designate_elect, self.policy)
        if code == RequestCode.CONTROLLER_REGISTER_BROKER:
            r = RegisterBrokerToControllerRequestHeader.from_ext(ext)
            return m.register_broker(r.cluster_name, r.broker_name, r.broker_id, r.broker_address, self._alive)
        if code == RequestCode.CONTROLLER_GET_REPLICA_INFO:
            return m.replica_info(GetReplicaInfoRequestHeader.from_ext(ext).broker_name)
        if code == RequestCode.CONTROLLER_GET_SYNC_STATE_DATA:
            try:
                names = loads(request.body) if request.body else []
            except (BodyError, ValueError) as exc:
                return Result(ResponseCode.CONTROLLER_INVALID_REQUEST, f"bad list of broker names: {exc}")
            if not isinstance(names, list):
                return Result(ResponseCode.CONTROLLER_INVALID_REQUEST, "the body is not a list of broker names")
            return m.sync_state_data([str(n) for n in names], self._alive)
        if code == RequestCode.CLEAN_BROKER_DATA:
            c = CleanControllerBrokerDataRequestHeader.from_ext(ext)
            return m.clean_broker_data(
                c.cluster_name, c.broker_name, c.broker_controller_ids_to_clean, c.is_clean_living_broker, self._alive
            )
        if code == RequestCode.CONTROLLER_GET_NEXT_BROKER_ID:
            n = GetNextBrokerIdRequestHeader.from_ext(ext)
            return m.next_broker_id(n.cluster_name, n.broker_name)
        p = ApplyBrokerIdRequestHeader.from_ext(ext)
        result = m.apply_broker_id(p.cluster_name, p.broker_name, p.applied_broker_id, p.register_check_code)
        return Result(
            result.code, result.remark, ClusterBrokerResponseHeader(p.cluster_name, p.broker_name), None, result.events
        )

    async def _on_request(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        response = await self.handle(request)
        if request.code == RequestCode.CONTROLLER_ELECT_MASTER and response.code == ResponseCode.SUCCESS:
            self._notify_role_changed(response)
        return response

    async def handle(self, request: RemotingCommand) -> RemotingCommand:
        """Answer a controller request as the leader (see the module docstring)."""
        async with self._lock:
            if not self.leading:
                with trio.move_on_after(READY_WAIT):
                    while self.node.core.is_leader and not self.leading:
                        await self._applied.wait()
                if not self.leading:
                    return self._not_leader(request)
            result = self._compute(request)
            if result.events:
                term = self.node.core.term
                try:
                    last = -1
                    for event in result.events:
                        last = self.node.propose(encode_event(event))
                except NotLeader:
                    return self._not_leader(request)
                with trio.move_on_after(WAIT_TIMEOUT):
                    while self.applied < last and self.node.core.term == term and self.node.core.is_leader:
                        await self._applied.wait()
                if self.applied < last or self.node.dlog.term_at(last) != term:
                    if not self.node.core.is_leader:
                        return self._not_leader(request)
                    return request.make_response(ResponseCode.SYSTEM_ERROR, f"not applied within {WAIT_TIMEOUT} s")
            ext = result.header.to_ext() if result.header is not None else None
            return request.make_response(result.code, result.remark, ext, result.body or b"")

    async def _on_heartbeat(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        h = BrokerHeartbeatRequestHeader.from_ext(request.ext_fields)
        if h.broker_id is None:
            return request.make_response(ResponseCode.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
        self.heartbeats.on_heartbeat(
            h.cluster_name, h.broker_name, h.broker_addr, h.broker_id, self._clock_ms(),
            timeout_ms=h.heartbeat_timeout_mills, epoch=h.epoch, max_offset=h.max_offset,
            confirm_offset=h.confirm_offset, election_priority=h.election_priority, channel=ctx.connection,
        )  # fmt: skip
        return request.make_response(ResponseCode.SUCCESS, "Heart beat success")

    async def _on_metadata(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        core, peers = self.node.core, self.config.peers
        leader = core.leader_id
        header = GetMetaDataResponseHeader(
            group=self.config.group, controller_leader_id=leader,
            controller_leader_address=peers.get(leader) if leader is not None else None,
            is_leader=self.leading, peers="".join(f"{k}:{v};" for k, v in peers.items()),
        )  # fmt: skip
        return request.make_response(ResponseCode.SUCCESS, None, header.to_ext())

    async def _on_get_config(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        text = "".join(f"{k}={v}\n" for k, v in self.config.to_properties().items())
        return request.make_response(ResponseCode.SUCCESS, None, body=text.encode())

    async def _on_update_config(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        """This member's settings changed, all of the body's keys or none (ControllerRequestProcessor's
        handleUpdateControllerConfig; RocketMQ ignores keys it does not know, rmq says so)."""
        if not request.body:
            return request.make_response(ResponseCode.SUCCESS)
        try:
            text = request.body.decode("utf-8")
        except UnicodeDecodeError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"the config body is not UTF-8: {exc}")
        props = properties.parse(text)
        if self.config.black_list() & props.keys():
            return request.make_response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        try:
            config, unknown = self.config.with_properties(props, runtime_only=True)
            config.validate()
        except ConfigError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"config not updated: {exc}")
        if unknown:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"config not updated: keys rmq does not know or act on: {', '.join(unknown)}"
            )
        self.config = config
        self.replicas.enable_elect_unclean_master = config.enable_elect_unclean_master
        log.info("controller config updated: %s", ", ".join(f"{k}={v}" for k, v in props.items()))
        return request.make_response(ResponseCode.SUCCESS)

    # -- elections the controller starts ---------------------------------------------------------

    async def elect_for(self, broker_name: str) -> RemotingCommand | None:
        """The controller's own election in ``broker_name`` (its master is gone), tried up to
        electMasterMaxRetryCount times; the last answer (None: not the leader)."""
        response = None
        header = ElectMasterRequestHeader(broker_name=broker_name)
        for _ in range(self.config.elect_master_max_retry_count):
            if not self.node.core.is_leader:
                return None
            request = RemotingCommand.request(RequestCode.CONTROLLER_ELECT_MASTER, header.to_ext())
            response = await self.handle(request)
            if response.code == ResponseCode.SUCCESS:
                log.info("%s: new master elected: %s", broker_name, response.ext_fields)
                self._notify_role_changed(response)
                return response
            if response.code in (ResponseCode.CONTROLLER_MASTER_STILL_EXIST, ResponseCode.CONTROLLER_NOT_LEADER):
                return response
        log.warning("%s: no master elected: %s", broker_name, response.remark if response else None)
        return response

    async def _scan_brokers(self) -> None:
        while True:
            await trio.sleep(self.config.scan_not_active_broker_interval_ms / 1000)
            for cluster, name, broker_id in self.heartbeats.scan(self._clock_ms()):
                log.warning("broker %s/%s id %d: heartbeats stopped", cluster, name, broker_id)
                if self._was_master(name, broker_id):
                    await self.elect_for(name)

    def _was_master(self, broker_name: str, broker_id: int) -> bool:
        """``broker_id`` is ``broker_name``'s master and this member leads (it elects)."""
        state = self.replicas.sync_states.get(broker_name)
        return self.leading and state is not None and state.master_broker_id == broker_id

    def _connection_closed(self, conn: Connection) -> None:
        """The brokers that beat on ``conn`` are inactive now (BrokerHousekeepingService); a
        master among them is replaced at once."""
        for cluster, name, broker_id in self.heartbeats.on_channel_close(conn):
            log.warning("broker %s/%s id %d: its connection closed", cluster, name, broker_id)
            if self._was_master(name, broker_id) and self._nursery is not None:
                self._nursery.start_soon(self.elect_for, name)

    async def _scan_masters(self) -> None:
        while True:
            await trio.sleep(self.config.scan_inactive_master_interval_ms / 1000)
            if self.leading:
                for name in self.replicas.need_reelect(self._alive):
                    await self.elect_for(name)

    def _notify_role_changed(self, response: RemotingCommand) -> None:
        """Tell the group's alive brokers of their new master (notifyBrokerRoleChanged)."""
        if not self.config.notify_broker_role_changed or self._nursery is None:
            return
        try:
            body = loads(response.body)
            group = body.get("brokerMemberGroup") if isinstance(body, dict) else None
            ext = response.ext_fields
            master = int(ext["masterBrokerId"])
        except (BodyError, ValueError, KeyError, TypeError):
            return
        if not isinstance(group, dict):
            return
        cluster, name = str(group.get("cluster", "")), str(group.get("brokerName", ""))
        header = NotifyBrokerRoleChangedRequestHeader(
            master_address=ext.get("masterAddress"), master_epoch=int(ext.get("masterEpoch", 0)),
            sync_state_set_epoch=int(ext.get("syncStateSetEpoch", 0)), master_broker_id=master,
        )  # fmt: skip
        sync = dumps(SyncStateSet(frozenset({master}), header.sync_state_set_epoch or 0).to_json())
        for broker_id, addr in (group.get("brokerAddrs") or {}).items():
            if self._alive(cluster, name, int(broker_id)):
                self._nursery.start_soon(self._notify, str(addr), header, sync)

    async def _notify(self, addr: str, header: NotifyBrokerRoleChangedRequestHeader, body: bytes) -> None:
        client = self._client
        if client is None:
            return
        request = RemotingCommand.request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, header.to_ext(), body)
        try:
            await client.invoke_oneway(addr, request, NOTIFY_TIMEOUT)
        except RemotingError as exc:
            log.warning("could not tell broker %s of its new master: %s", addr, exc)

    # -- lifetime ------------------------------------------------------------------------------

    @property
    def port(self) -> int | None:
        return self.node.port

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with RemotingClient() as client, trio.open_nursery() as nursery:
                self._client = client
                self._nursery = nursery
                await nursery.start(self.node.serve)
                nursery.start_soon(self._scan_brokers)
                nursery.start_soon(self._scan_masters)
                log.info(
                    "controller %s of %s serving on %s", self.config.self_id, self.config.group, self.config.address
                )
                task_status.started(self)
        finally:
            self._nursery = self._client = None
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop: requests in flight are cut short (the log is synced as the member stops)."""
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def aclose(self) -> None:
        self.shutdown()
        await self._stopped.wait()

"""A controller-mode broker's dealings with its controller (RocketMQ 5's ReplicasManager).

With enableControllerMode=true a broker does not choose its role. It:

1. finds the controller leader (CONTROLLER_GET_METADATA_INFO to the members in controllerAddr,
   again every syncControllerMetadataPeriod and whenever a member says it does not lead);
2. gets its brokerId once, kept in the store's brokerIdentity file ("cluster#name#id"; the
   "-temp" file holds an id asked for but not yet granted, with its register check code):
   CONTROLLER_GET_NEXT_BROKER_ID, then CONTROLLER_APPLY_BROKER_ID;
3. registers (CONTROLLER_REGISTER_BROKER), heartbeats every member every
   brokerHeartbeatInterval (BROKER_HEARTBEAT with its epoch and offsets), and asks for an
   election when its group has no master (CONTROLLER_ELECT_MASTER);
4. follows what the controller says, from its answers, from NOTIFY_BROKER_ROLE_CHANGED and
   from CONTROLLER_GET_REPLICA_INFO every syncBrokerMetadataPeriod: a master epoch newer than
   the one it knows makes it master (when the master named is itself) or a slave of the
   master named (``RoleChanges``);
5. as master, proposes SyncStateSet changes (CONTROLLER_ALTER_SYNC_STATE_SET) for its HA
   service (``propose``; ha/insync.py decides them).

Until step 4 names its role the broker is a slave that follows nobody: it answers no send, so
nothing is acknowledged by a broker that is not its group's elected master.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.bodies.controller import EpochEntry, EpochEntryCache, SyncStateSet
from rmq.protocol.headers import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    Header,
    NotifyBrokerRoleChangedRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from rmq.remoting import RemotingClient, RemotingError

from .ha.insync import InSync

if TYPE_CHECKING:
    from rmq.remoting import RequestContext
    from rmq.store import MessageStore
    from rmq.store.epochs import EpochCache

    from .config import BrokerConfig

log = logging.getLogger("rmq.broker.controller")

RETRY_INTERVAL = 1.0  # seconds between tries while no controller answers
REQUEST_TIMEOUT = 3.0


class ControllerRefused(Exception):
    """A controller answered with an error code."""

    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(f"controller answered {code}: {remark or ''}")
        self.code = code


# what a role change does to the broker (BrokerController implements them)
BecomeMaster = Callable[[int], Awaitable[None]]  # (master epoch)
BecomeSlave = Callable[[str, int], Awaitable[None]]  # (master address, master epoch)


class ReplicasManager:
    """Args:
    config: the broker's configuration as of now (a callable: role changes replace it).
    address: the broker's address ("ip:port"), once bound.
    store: the message store (its offsets go into heartbeats).
    epochs: the epoch file.
    client: the remoting client to the controllers.
    become_master / become_slave: the broker's role changes.
    """

    def __init__(
        self,
        config: Callable[[], BrokerConfig],
        address: Callable[[], str],
        store: MessageStore,
        epochs: EpochCache,
        client: RemotingClient,
        become_master: BecomeMaster,
        become_slave: BecomeSlave,
    ) -> None:
        self._config = config
        self._address = address
        self.store = store
        self.epochs = epochs
        self.client = client
        self._become_master = become_master
        self._become_slave = become_slave
        c = config()
        self.controllers = c.controller_addrs
        self.leader = ""  # the controller leader's address, "" until known
        self.broker_id: int | None = None  # assigned by the controller (brokerIdentity file)
        self.master_epoch = 0
        self.master_id: int | None = None
        self.master_address = ""
        self.insync = InSync(
            local_id=-1,
            all_ack=c.all_ack_in_sync_state_set,
            in_sync_replicas=c.in_sync_replicas,
            min_in_sync_replicas=c.min_in_sync_replicas,
            max_not_caught_up_ms=c.ha_max_time_slave_not_catchup,
        )
        self.confirmed: Callable[[], object] = lambda: None  # the HA service recounts (set by the broker)
        self.elections_seen = 0
        self.running = False
        self._lock = trio.Lock()  # one role change at a time
        self._nursery: trio.Nursery | None = None
        self._wake_sync = trio.Event()
        self._leader_lost = trio.Event()
        self._beating: dict[str, bool] = {}  # controller address -> its last heartbeat answered

    def status_fields(self) -> dict[str, str]:
        """Runtime info fields (GET_BROKER_RUNTIME_INFO) of controller mode."""
        return {
            "controllerLeaderAddress": self.leader,
            "controllerBrokerId": "" if self.broker_id is None else str(self.broker_id),
            "controllerMasterEpoch": str(self.master_epoch),
            "controllerMasterBrokerId": "" if self.master_id is None else str(self.master_id),
            "controllerMasterAddress": self.master_address,
            "syncStateSet": ",".join(str(b) for b in sorted(self.insync.members)),
            "syncStateSetEpoch": str(self.insync.epoch),
            "epochEntries": ";".join(f"{e}-{s}" for e, s in self.epoch_entries()),
        }

    # -- ControllerRole (ha/master.py) ---------------------------------------------------

    def epoch_entries(self) -> list[tuple[int, int]]:
        return [(e.epoch, e.start_offset) for e in self.epochs.entries]

    def propose(self, members: frozenset[int]) -> None:
        if self.insync.proposed is not None or self._nursery is None:
            return
        self.insync.proposed = members
        self._nursery.start_soon(self._alter, members)

    def newer_epoch_seen(self, epoch: int) -> None:
        if epoch > self.master_epoch:
            self._wake_sync.set()

    # -- requests to the controller ------------------------------------------------------

    async def _call(
        self, code: int, header: Header | None = None, body: bytes = b"", *, addr: str = ""
    ) -> RemotingCommand:
        """A request to the leader (or ``addr``); ControllerRefused for an error answer, after
        which a NOT_LEADER answer has the leader looked up again."""
        target = addr or self.leader
        if not target:
            raise ControllerRefused(ResponseCode.CONTROLLER_NOT_LEADER, "no controller leader known")
        request = RemotingCommand.request(code, header.to_ext() if header else None, body)
        try:
            response = await self.client.invoke(target, request, REQUEST_TIMEOUT)
        except RemotingError:
            if not addr:  # the leader may be gone: look for another at once
                self.leader = ""
                self._leader_lost.set()
            raise
        if response.code != ResponseCode.SUCCESS:
            if response.code == ResponseCode.CONTROLLER_NOT_LEADER and not addr:
                self.leader = ""
                self._leader_lost.set()
            raise ControllerRefused(response.code, response.remark)
        return response

    async def find_leader(self) -> bool:
        for addr in self.controllers:
            try:
                r = await self._call(RequestCode.CONTROLLER_GET_METADATA_INFO, addr=addr)
            except (RemotingError, ControllerRefused):
                continue
            leader = r.ext_fields.get("controllerLeaderAddress") or ""
            if leader and (r.ext_fields.get("isLeader") == "true" or leader != addr):
                if leader != self.leader:
                    log.info("controller leader is %s", leader)
                self.leader = leader
                return True
        return False

    # -- the broker's id (brokerIdentity) ------------------------------------------------

    def _identity_paths(self) -> tuple[Path, Path]:
        path = self._config().broker_identity_file
        return path, path.with_name(path.name + "-temp")

    def _read_identity(self) -> tuple[int | None, tuple[int, str] | None]:
        """(granted id, (asked id, check code) of a pending application)."""
        c = self._config()
        path, temp = self._identity_paths()
        granted = pending = None
        for p, want in ((path, 3), (temp, 4)):
            try:
                parts = p.read_text(encoding="utf-8").strip().split("#")
            except FileNotFoundError:
                continue
            if len(parts) != want or not parts[2].lstrip("-").isdigit():
                raise ValueError(f"{p}: not a broker identity ({'#'.join(parts)!r})")
            if (parts[0], parts[1]) != (c.broker_cluster_name, c.broker_name):
                raise ValueError(
                    f"{p} names {parts[0]}/{parts[1]}, this broker is {c.broker_cluster_name}/{c.broker_name}: "
                    "the store belongs to another broker"
                )
            if want == 3:
                granted = int(parts[2])
            else:
                pending = (int(parts[2]), parts[3])
        return granted, pending

    @staticmethod
    def _write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    async def _obtain_id(self) -> int:
        c = self._config()
        granted, pending = self._read_identity()
        if granted is not None:
            return granted
        path, temp = self._identity_paths()
        if pending is None:
            r = await self._call(
                RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                GetNextBrokerIdRequestHeader(c.broker_cluster_name, c.broker_name),
            )
            asked = int(r.ext_fields["nextBrokerId"])
            pending = (asked, f"{self._address()};{int(time.time() * 1000)}")
            self._write(temp, f"{c.broker_cluster_name}#{c.broker_name}#{asked}#{pending[1]}")
        try:
            await self._call(
                RequestCode.CONTROLLER_APPLY_BROKER_ID,
                ApplyBrokerIdRequestHeader(c.broker_cluster_name, c.broker_name, pending[0], pending[1]),
            )
        except ControllerRefused:
            temp.unlink(missing_ok=True)  # taken by another broker: ask for the next one
            raise
        self._write(path, f"{c.broker_cluster_name}#{c.broker_name}#{pending[0]}")
        temp.unlink(missing_ok=True)
        return pending[0]

    async def _register(self) -> None:
        c = self._config()
        if self.broker_id is None:
            self.broker_id = await self._obtain_id()
            self.insync.local_id = self.broker_id
            log.info("broker %s is brokerId %d in its group's controller", c.broker_name, self.broker_id)
            await self.beat_all()  # alive before it registers: the controller elects only alive brokers
        r = await self._call(
            RequestCode.CONTROLLER_REGISTER_BROKER,
            RegisterBrokerToControllerRequestHeader(
                c.broker_cluster_name, c.broker_name, self.broker_id, self._address()
            ),
        )
        await self._follow(r.ext_fields, r.body)

    # -- role ----------------------------------------------------------------------------

    async def _follow(self, fields: dict[str, str], body: bytes | None) -> bool:
        """Act on a master (id, address, epoch) and SyncStateSet the controller named.
        False when it names no master."""
        master_id = fields.get("masterBrokerId")
        epoch = int(fields.get("masterEpoch") or 0)
        address = fields.get("masterAddress") or ""
        if not master_id or not address:
            return False
        sss: SyncStateSet | None = None
        if body:
            try:
                sss = SyncStateSet.from_json(json_body.loads(body))
            except (ValueError, TypeError):
                sss = None
        if sss is None and fields.get("syncStateSetEpoch"):
            sss = SyncStateSet(frozenset(), int(fields["syncStateSetEpoch"]))
        await self.change_role(int(master_id), address, epoch, sss)
        return True

    async def change_role(self, master_id: int, address: str, epoch: int, sss: SyncStateSet | None) -> None:
        async with self._lock:
            if epoch < self.master_epoch:
                return
            if epoch == self.master_epoch:
                if master_id == self.broker_id and sss is not None and sss.sync_state_set:
                    if self.insync.adopt(sss.sync_state_set, sss.sync_state_set_epoch):
                        self.confirmed()
                return
            self.master_epoch, self.master_id, self.master_address = epoch, master_id, address
            self.elections_seen += 1
            if master_id == self.broker_id:
                members = sss.sync_state_set if sss is not None else frozenset()
                self.insync = InSync(
                    local_id=master_id,
                    all_ack=self.insync.all_ack,
                    in_sync_replicas=self.insync.in_sync_replicas,
                    min_in_sync_replicas=self.insync.min_in_sync_replicas,
                    max_not_caught_up_ms=self.insync.max_not_caught_up_ms,
                )
                self.insync.adopt(members or frozenset({master_id}), sss.sync_state_set_epoch if sss else 0)
                self.insync.since_ms = int(time.time() * 1000)
                log.info("elected master of epoch %d (SyncStateSet %s)", epoch, sorted(self.insync.members))
                await self._become_master(epoch)
            else:
                log.info("master of epoch %d is brokerId %d at %s: following it", epoch, master_id, address)
                await self._become_slave(address, epoch)
            self.running = True

    async def _elect(self) -> None:
        c = self._config()
        assert self.broker_id is not None
        try:
            r = await self._call(
                RequestCode.CONTROLLER_ELECT_MASTER,
                ElectMasterRequestHeader(c.broker_name, c.broker_cluster_name, self.broker_id),
            )
        except ControllerRefused as exc:
            if exc.code != ResponseCode.CONTROLLER_MASTER_STILL_EXIST:
                raise
            await self.sync_replica_info()  # someone else is master: learn who
            return
        await self._follow(r.ext_fields, r.body)

    async def sync_replica_info(self) -> None:
        """CONTROLLER_GET_REPLICA_INFO: follow the master and SyncStateSet it names; ask for
        an election when there is none."""
        c = self._config()
        r = await self._call(RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(c.broker_name))
        if not await self._follow(r.ext_fields, r.body) and self.broker_id is not None:
            await self._elect()

    async def _alter(self, members: frozenset[int]) -> None:
        c = self._config()
        body = json_body.dumps(SyncStateSet(members, self.insync.epoch).to_json())
        try:
            assert self.broker_id is not None
            r = await self._call(
                RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                AlterSyncStateSetRequestHeader(c.broker_name, self.broker_id, self.master_epoch),
                body,
            )
        except (RemotingError, ControllerRefused) as exc:
            log.warning("SyncStateSet %s not taken by the controller: %s", sorted(members), exc)
            if self.insync.proposed == members:
                self.insync.proposed = None
            self._wake_sync.set()  # a fenced epoch: we may have been replaced
            return
        epoch = int(r.ext_fields.get("newSyncStateSetEpoch") or 0)
        if self.insync.proposed == members and self.insync.adopt(members, epoch):
            log.info("SyncStateSet is now %s (epoch %d)", sorted(members), epoch)
            self.confirmed()

    async def notified(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """NOTIFY_BROKER_ROLE_CHANGED from a controller (oneway)."""
        try:
            header = NotifyBrokerRoleChangedRequestHeader.from_ext(request.ext_fields)
        except ValueError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad NOTIFY_BROKER_ROLE_CHANGED: {exc}")
        fields = {
            "masterBrokerId": "" if header.master_broker_id is None else str(header.master_broker_id),
            "masterAddress": header.master_address or "",
            "masterEpoch": str(header.master_epoch or 0),
            "syncStateSetEpoch": str(header.sync_state_set_epoch or 0),
        }
        if self._nursery is not None:
            self._nursery.start_soon(self._follow_quietly, fields, request.body)
        return request.make_response(ResponseCode.SUCCESS)

    async def epoch_cache(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_EPOCH_CACHE: this broker's epochs (RocketMQ's EpochEntryCache; the last
        entry open-ended, as EpochFileCache keeps it)."""
        c = self._config()
        entries = self.epoch_entries()
        listed = tuple(
            EpochEntry(e, s, entries[i + 1][1]) if i + 1 < len(entries) else EpochEntry(e, s)
            for i, (e, s) in enumerate(entries)
        )
        body = EpochEntryCache(
            c.broker_cluster_name,
            c.broker_name,
            -1 if self.broker_id is None else self.broker_id,
            listed,
            self.store.max_phy_offset,
        )
        response = request.make_response(ResponseCode.SUCCESS)
        response.body = json_body.dumps(body.to_json())
        return response

    async def _follow_quietly(self, fields: dict[str, str], body: bytes | None) -> None:
        try:
            await self._follow(fields, body)
        except Exception:
            log.exception("role change from a controller's notice failed")

    # -- tasks ---------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            nursery.start_soon(self._heartbeats)
            while not self.running:  # RocketMQ's startBasicService, retried
                try:
                    if self.leader or await self.find_leader():
                        await self._register()
                        if not self.running:
                            await self._elect()
                except ControllerRefused as exc:
                    # at a group's start the others' elections fail until the first master is in
                    level = logging.INFO if exc.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED else logging.WARNING
                    log.log(level, "controller registration: %s; retrying", exc)
                except (RemotingError, KeyError, ValueError) as exc:
                    log.warning("controller registration: %s; retrying", exc)
                if not self.running:
                    await trio.sleep(RETRY_INTERVAL * (0.5 + random.random()))
            nursery.start_soon(self._sync_controller)
            nursery.start_soon(self._sync_broker)

    def _heartbeat(self) -> RemotingCommand:
        c = self._config()
        header = BrokerHeartbeatRequestHeader(
            cluster_name=c.broker_cluster_name,
            broker_addr=self._address(),
            broker_name=c.broker_name,
            broker_id=self.broker_id,
            epoch=self.epochs.last_epoch,
            max_offset=self.store.max_phy_offset,
            confirm_offset=self.store.max_phy_offset,
            heartbeat_timeout_mills=c.controller_heart_beat_timeout_mills,
            election_priority=c.broker_election_priority,
        )
        return RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, header.to_ext())

    async def beat_all(self) -> None:
        """One BROKER_HEARTBEAT to every controller member, at once."""
        async with trio.open_nursery() as nursery:
            for addr in self.controllers:
                nursery.start_soon(self._beat, addr)

    async def _beat(self, addr: str) -> None:
        timeout = self._config().send_heartbeat_timeout_millis / 1000
        try:
            with trio.fail_after(timeout):
                r = await self.client.invoke(addr, self._heartbeat(), timeout)
            ok = r.code == ResponseCode.SUCCESS
            why = r.remark or str(r.code)
        except (RemotingError, trio.TooSlowError) as exc:
            ok, why = False, str(exc) or type(exc).__name__
        if ok != self._beating.get(addr, True):
            log.log(
                logging.INFO if ok else logging.WARNING, "heartbeat to controller %s: %s", addr, "ok" if ok else why
            )
        self._beating[addr] = ok

    async def _heartbeats(self) -> None:
        """Every brokerHeartbeatInterval, each member on its own: one that is slow or gone
        does not delay the others' beats past the controller's timeout."""
        while True:
            if self.broker_id is not None:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self.beat_all)
                    await trio.sleep(self._config().broker_heartbeat_interval / 1000)
            else:
                await trio.sleep(self._config().broker_heartbeat_interval / 1000)

    async def _sync_controller(self) -> None:
        while True:
            with trio.move_on_after(self._config().sync_controller_metadata_period / 1000):
                await self._leader_lost.wait()  # a NOT_LEADER answer: look again at once
            self._leader_lost = trio.Event()
            if not await self.find_leader():
                await trio.sleep(RETRY_INTERVAL)

    async def _sync_broker(self) -> None:
        while True:
            with trio.move_on_after(self._config().sync_broker_metadata_period / 1000):
                await self._wake_sync.wait()
            self._wake_sync = trio.Event()
            try:
                await self.sync_replica_info()
            except ControllerRefused as exc:
                if exc.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
                    await self._register_quietly()
                else:
                    log.info("replica info: %s", exc)
            except RemotingError as exc:
                log.info("replica info: %s", exc)

    async def _register_quietly(self) -> None:
        try:
            await self._register()
        except (RemotingError, ControllerRefused) as exc:
            log.warning("controller registration: %s", exc)

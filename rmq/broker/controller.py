"""BrokerController: one broker, everything it runs owned by one nursery.

    async with BrokerController(config) as broker:       # serving once this returns
        print(broker.address)                            # "brokerIP1:port", as registered

    broker = await nursery.start(BrokerController(config).serve)   # the same, in your nursery

What `serve` does, in order: load topics, offsets and subscription groups; open the
message store (recovering it if the last run crashed); rebuild the delay-level, timer and
transaction state from it; start the store's tasks, the main server (listenPort), the
VIP server (listenPort - 2), registration with every name server, client housekeeping
(expiry scan, statistics), the metadata writers (topics and groups within 0.1 s of a
change, offsets within 5 s, each in a worker thread), delayed and timer delivery and the
transaction check-back; report started. With `aclEnable=true` the ACL file is read first
(a broken one stops the start) and watched for changes while serving. With
`listenPort=0` the port is picked by the OS and the registered address uses the port
actually bound.

Stopping (`shutdown()`, leaving `async with`, or cancelling `serve`): parked pulls are
woken so they answer at once, the servers stop accepting and drain, the broker
unregisters from its name servers, offsets, topics, subscription groups and delivery
progress are written, and the store is flushed and closed, so no abort file remains.

Wall-clock time (store timestamps, delivery times) comes from `clock_ms`; tests pass one
derived from Trio's clock so that MockClock drives delays and timers too.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any, ClassVar

import trio

from rmq.dledger.node import NodeConfig
from rmq.lifetime import Service
from rmq.protocol import LanguageCode, RemotingCommand, RequestCode
from rmq.protocol.constants import MASTER_ID, PERM_READ, PERM_WRITE
from rmq.raft.core import RaftConfig
from rmq.remoting import (
    Connection,
    RemotingClient,
    RemotingError,
    RemotingServer,
    ServerConfig,
    busypoll,
)
from rmq.store import MessageStore, StoreConfig, wall_clock_ms
from rmq.store.aio import AsyncMessageStore
from rmq.store.config import FlushDiskType
from rmq.store.epochs import EpochCache

from .acl import PlainAcl
from .client_manager import ClientManager
from .config import BrokerConfig, BrokerRole, ConfigError, slave_id
from .dledger.commitlog import DLedgerCommitLog, member_commitlog
from .ha.master import HAService
from .ha.slave import HAClient
from .ha.sync import SlaveSynchronize
from .long_polling import PullWaiters
from .offsets import ConsumerOffsetManager
from .order_info import ConsumerOrderInfoManager
from .parts import BrokerParts, Identity, RoleCell
from .pop_queues import PopQueues
from .processors import build_dispatcher
from .rebalance_lock import RebalanceLockManager
from .registration import Registration, register_period
from .replicas import ReplicasManager
from .revive import ReviveService, recover_pop_offsets
from .schedule import ScheduleService
from .stats import SAMPLE_INTERVAL, BrokerStats
from .subscriptions import SubscriptionGroupManager
from .timer import TimerService
from .tls import BrokerTls
from .topics import TopicConfigManager
from .transaction import TransactionService

log = logging.getLogger("rmq.broker")

CLIENT_SCAN_INTERVAL = 10.0  # seconds (ClientHousekeepingService)
NOTIFY_TIMEOUT = 3.0  # seconds to queue a NOTIFY_CONSUMER_IDS_CHANGED on one connection
UNREGISTER_TIMEOUT = 3.0  # seconds the shutdown waits for the name servers
SHUTDOWN_GRACE = 2.0  # seconds connections get to finish in-flight requests
NO_EXPORTER = "PROM, but this process has no exporter: call rmq.metrics.install() first"
MAX_IN_FLIGHT = 16384  # per connection: a consumer parks one pull per queue it owns
FIND_MASTER_INTERVAL = 1.0  # seconds between a DLedger follower's registrations to learn its master
FIND_MASTER_TRIES = 30


def _memory_budget(percent: int) -> int:
    """Bytes of CommitLog behind its end still considered in the page cache
    (accessMessageInMemoryMaxRatio percent of physical memory)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 8 * 1024**3
    return total * percent // 100


class BrokerController(Service):
    """A broker: metadata, message store, servers and background tasks.

    Args:
      config: the validated configuration.
      clock_ms: wall-clock milliseconds for the store and the delivery services.

    Attributes (usable once serving):
      config, topics, offsets, subscriptions, clients, locks, waiters, stats, order_info,
        pop_queues: the parts.
      schedule, timers, transactions: delay levels, timer messages, transactions.
      message_store: the synchronous MessageStore (reads); store: its AsyncMessageStore
        front (appends).
      port, vip_port: bound ports (vip_port None without the VIP channel).
      tls: the TLS mode and contexts of its ports and its own connections (tls.py).
      address: "brokerIP1:port", the address registered with name servers and stamped
        into records as the store host.
    """

    #: Builds the Prometheus exporter of a broker configured with metricsExporterType=PROM,
    #: from the broker's own state. rmq.metrics.install() sets it: the rmq commands, `rmq dev`
    #: and EmbeddedCluster call that, so the broker never imports what observes it.
    exporter_factory: ClassVar[Callable[[BrokerController], Any] | None] = None

    def __init__(self, config: BrokerConfig, *, clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        # A DLedger member comes as a follower (SLAVE, its follower brokerId) from
        # BrokerConfig.from_properties, until its group elects it and it has caught up
        # (_dledger_role).
        # the configuration as of now (a DLedger election changes it)
        self.role = RoleCell(config, _memory_budget(config.access_message_in_memory_max_ratio))
        self.identity = Identity(config.broker_ip1, time.time())
        self.tls = BrokerTls.from_config(config)  # ConfigError if a certificate cannot be loaded
        self.clock_ms = clock_ms
        self.topics = TopicConfigManager(config, on_change=self._topics_changed)
        self.offsets = ConsumerOffsetManager(config.config_dir)
        self.order_info = ConsumerOrderInfoManager(config.config_dir, now_ms=clock_ms)
        self.pop_queues = PopQueues()
        self.subscriptions = SubscriptionGroupManager(config)
        self.clients = ClientManager(trio.current_time)
        self.locks = RebalanceLockManager(trio.current_time)
        self.waiters = PullWaiters()
        self.stats = BrokerStats(trio.current_time)
        # built once the store is open (serve): the parts, and the services over them
        self.parts: BrokerParts
        self.message_store: MessageStore
        self.store: AsyncMessageStore
        self.schedule: ScheduleService
        self.timers: TimerService
        self.revive: ReviveService
        self.transactions: TransactionService
        self.vip_port: int | None = None
        self.registration: Registration | None = None
        self.ha: HAService | HAClient | None = None  # replication: master service or slave client
        self.acl: PlainAcl | None = None  # aclEnable=true: read in serve(), checks every request
        self.slave_sync: SlaveSynchronize | None = None
        self.dledger: DLedgerCommitLog | None = None  # enableDLegerCommitLog: the group member
        self._leader_scope: trio.CancelScope | None = None
        self.metrics: Any = None  # metricsExporterType=PROM: the MetricsExporter (rmq/metrics)
        self._nursery: trio.Nursery | None = None
        self._servers: list[RemotingServer] = []
        self._stop = trio.Event()
        self._stopped = trio.Event()
        self._clock_jumped = trio.Event()
        self._leader_changed = trio.Event()  # a DLedger follower's leader changed
        # enableControllerMode: the controller's client, the epoch file, what role changes stop
        self.replicas: ReplicasManager | None = None
        self.epochs: EpochCache | None = None
        self._ha_scope: trio.CancelScope | None = None
        self._registering = False

    def __repr__(self) -> str:
        return f"<BrokerController {self.config.broker_name} {self.address if self.port else 'not serving'}>"

    # -- identity ---------------------------------------------------------------------

    @property
    def config(self) -> BrokerConfig:
        """The configuration as of now (``role.config``)."""
        return self.role.config

    @config.setter
    def config(self, config: BrokerConfig) -> None:
        self.role.config = config

    @property
    def master_addr(self) -> str:
        """A slave's master, as the name servers last said."""
        return self.role.master_addr

    @master_addr.setter
    def master_addr(self, addr: str) -> None:
        self.role.master_addr = addr

    @property
    def port(self) -> int:
        """The bound main port (0 until bound)."""
        return self.identity.port

    @property
    def address(self) -> str:
        """ "brokerIP1:port": registered with the name servers, stamped into records."""
        return self.identity.address

    @property
    def ha_address(self) -> str:
        """brokerIP2:haPort, sent to name servers as haServerAddr (slaves connect there)."""
        port = self.ha.port if isinstance(self.ha, HAService) and self.ha.port else self.config.ha_port
        return f"{self.config.advertised_ip2}:{port or self.port + 1}"

    def _identity(self) -> tuple[str, str, str, str, int]:
        c = self.config
        return c.broker_name, self.address, c.broker_cluster_name, self.ha_address, c.broker_id

    def store_config(self) -> StoreConfig:
        c = self.config
        return StoreConfig(
            store_path_root_dir=str(c.store_path_root_dir),
            store_path_commitlog=str(c.commit_log_dir),
            mapped_file_size_commitlog=c.mapped_file_size_commit_log,
            mapped_file_size_consume_queue=c.mapped_file_size_consume_queue,
            flush_disk_type=c.flush_disk_type,
            sync_flush_timeout=c.sync_flush_timeout,
            file_reserved_time=c.file_reserved_time,
            delete_when=c.delete_when,
            disk_max_used_space_ratio=c.disk_max_used_space_ratio,
            disk_space_clean_forcibly_ratio=c.disk_space_clean_forcibly_ratio,
            disk_space_warning_level_ratio=c.disk_space_warning_level_ratio,
            clean_file_forcibly_enable=c.clean_file_forcibly_enable,
            warm_maped_file_enable=c.warm_maped_file_enable,
            lone_sync_inline=c.lone_sync_inline,
            max_message_size=c.max_message_size,
            max_msgs_num_batch=c.max_msgs_num_batch,
            max_transfer_bytes_on_message_in_memory=c.max_transfer_bytes_on_message_in_memory,
            max_transfer_count_on_message_in_memory=c.max_transfer_count_on_message_in_memory,
            message_delay_level=c.message_delay_level,
            flush_interval_commitlog=c.flush_interval_commit_log,
            flush_interval_consume_queue=c.flush_interval_consume_queue,
            flush_consume_queue_least_pages=c.flush_consume_queue_least_pages,
            flush_consume_queue_thorough_interval=c.flush_consume_queue_thorough_interval,
            flush_interval_index=c.flush_interval_index,
            clean_resource_interval=c.clean_resource_interval,
            check_crc_on_recover=c.check_crc_on_recover,
            message_index_enable=c.message_index_enable,
            max_hash_slot_num=c.max_hash_slot_num,
            max_index_num=c.max_index_num,
        )

    # -- lifetime ---------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[BrokerController] = trio.TASK_STATUS_IGNORED) -> None:
        """Start everything, report `self` to `nursery.start`, serve until stopped.

        Raises:
          StoreLockedError / StoreError: the store directory is in use or unusable.
          OSError: a port cannot be bound.
          ValueError: a metadata file (topics, offsets, groups) and its backup are unreadable.
        """
        config = self.config
        if config.prometheus_enabled and type(self).exporter_factory is None:
            raise ConfigError(f"broker config metricsExporterType: {NO_EXPORTER}")
        if config.busy_poll_micros:  # asked for: this process's loop polls before it sleeps
            busypoll.install(config.busy_poll_micros)
        if config.acl_enable and config.acl_file is not None:
            self.acl = PlainAcl(  # AclConfigError (a ValueError)
                config.acl_file, clock_ms=self.clock_ms, require_signed_code=config.acl_require_signed_request_code
            )
        self.topics.load()
        self.offsets.load()
        self.order_info.load()
        self.subscriptions.load()
        listeners = [self.waiters] if config.long_polling_enable else []
        store_config = self.store_config()
        dledger = self._dledger_node_config() if config.enable_d_leger_commit_log else None
        self.message_store = MessageStore(
            store_config,
            clock=self.clock_ms,
            commitlog=None if dledger is None else member_commitlog(dledger, str(store_config.commitlog_dir)),
        )
        self.store = AsyncMessageStore(self.message_store)
        self.parts = BrokerParts(
            role=self.role,
            identity=self.identity,
            message_store=self.message_store,
            store=self.store,
            topics=self.topics,
            offsets=self.offsets,
            subscriptions=self.subscriptions,
            clients=self.clients,
            locks=self.locks,
            waiters=self.waiters,
            stats=self.stats,
            order_info=self.order_info,
            pop_queues=self.pop_queues,
            clock_ms=self.clock_ms,
            sleep_wall=self.sleep_wall,
            notify_consumers=self.notify_consumer_ids_changed,
        )
        self.schedule = ScheduleService(self.parts)
        self.timers = TimerService(self.parts)
        self.revive = ReviveService(self.parts)
        self.transactions = TransactionService(self.parts)
        self.message_store.arrival_listener = _Arrivals([*listeners, self.schedule, self.timers])
        if config.long_polling_enable:  # a parked pull is answered without waiting for the reput task
            self.store.awaited = self.waiters.awaited
        if dledger is not None:
            self.dledger = DLedgerCommitLog(
                self.store,
                dledger,
                self._dledger_role,
                preferred_leader=config.preferred_leader_id,
                on_follow=self._dledger_follows,
            )
            # Set before any port opens: every send waits for its group's commit, and one the
            # member cannot replicate (it does not lead) is refused, never acknowledged alone.
            self.store.replication = self.dledger
            self.store.sync_replication = True
            self.store.replica_wait_always = True
            self.role.dledger = self.dledger
        failure: OSError | None = None
        try:
            async with (
                RemotingClient(self.tls.remoting_client_config()) as namesrv_client,
                trio.open_nursery() as nursery,
            ):
                self._nursery = nursery
                try:
                    await self._start(nursery, namesrv_client)
                except OSError as exc:  # a port in use
                    failure = exc  # raised below, outside the nursery, so it stays unwrapped
                    nursery.cancel_scope.cancel()
                else:
                    log.info("broker %s serving, registered as %s", config.broker_name, self.address)
                    task_status.started(self)
                    await self._stop.wait()
                    await self._stop_gracefully(nursery)
        finally:
            with trio.CancelScope(shield=True):
                await self._close()
        if failure is not None:
            raise failure

    async def _start(self, nursery: trio.Nursery, namesrv_client: RemotingClient) -> None:
        config = self.config
        if config.enable_controller_mode:
            self.epochs = EpochCache(str(config.epoch_file))  # EpochFileError: the file and its .bak damaged
            self.replicas = ReplicasManager(
                lambda: self.config,
                lambda: self.address,
                self.message_store,
                self.epochs,
                namesrv_client,
                self._controller_master,
                self._controller_slave,
            )
            self.role.controller = self.replicas
        await nursery.start(self.store.run)
        # Records recovered past the last dispatch are re-dispatched by a task; the delay,
        # timer and transaction services rebuild from their consume queues, so wait for it.
        await self.store.wait_dispatched()
        self.schedule.load()
        self.timers.load()
        self.transactions.load()
        if self.message_store.crashed:  # the metadata files lag the store: catch up before serving
            self._adopt_stored_topics()  # e.g. a POP retry topic made just before the crash
            recover_pop_offsets(self.parts)  # before the first pop: the offsets file lags the pops
        await self._start_servers(nursery)
        factory = type(self).exporter_factory
        if config.prometheus_enabled and factory is not None:  # serve() refused PROM without one
            self.metrics = factory(self)
            await nursery.start(self.metrics.serve)
        await self._start_replication(nursery, namesrv_client)
        try:
            self.topics.persist()
        except OSError as exc:  # a full disk: the store serves read-only; the file is as loaded
            log.error("cannot write topics at start: %s", exc)
        self.stats.store_stats = getattr(self.message_store, "_stats", None)  # found / miss TPS
        self.stats.sample()
        self.registration = Registration(
            namesrv_client,
            config.namesrv_addr,
            self._identity,
            self.topics.wrapper,
            register_period(config.register_name_server_period),
            on_registered=self._registered,
            # the name server orders a DLedger group's registrations by term, a controller-mode
            # group's by master epoch (registration.py)
            state_version=self._state_version,
        )
        if self.replicas is None:  # a controller-mode broker registers once it knows its role
            self._start_registration()
        if self.acl is not None:
            await nursery.start(self.acl.watch)
        nursery.start_soon(self.waiters.run)  # parked pulls' deadlines
        nursery.start_soon(self._housekeeping)
        for table in (self.topics, self.subscriptions, self.offsets, self.order_info):
            nursery.start_soon(table.writer.run)
        if self.dledger is None and not config.is_slave:  # a slave copies its master's deliveries
            await nursery.start(self._master_services)
        if self.replicas is not None:
            await nursery.start(self.replicas.run)

    def _state_version(self) -> int | None:
        if self.dledger is not None:
            return self.dledger.node.core.term
        if self.replicas is not None:
            return self.replicas.master_epoch
        return None

    def _start_registration(self) -> None:
        if not self._registering and self.registration is not None and self._nursery is not None:
            self._registering = True
            self._nursery.start_soon(self.registration.run)
        elif self.registration is not None:
            self.registration.trigger()

    async def _master_services(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Delay, timer, transaction check-back and POP revive: a master's work. A DLedger
        leader runs them while it leads (in ``_leader_scope``), starting from what it last synced."""
        with trio.CancelScope() as scope:
            self._leader_scope = scope
            async with trio.open_nursery() as nursery:
                await nursery.start(self.schedule.run)
                await nursery.start(self.timers.run)
                await nursery.start(self.transactions.run)
                await nursery.start(self.revive.run)  # POP's unacked messages come back
                task_status.started()

    async def _start_replication(self, nursery: trio.Nursery, client: RemotingClient) -> None:
        """A master serves its HA port; a slave follows its master and copies its metadata."""
        config = self.config
        if self.replicas is not None:  # the controller names the role (_controller_master/_slave)
            self.slave_sync = SlaveSynchronize(self.parts, client, self.schedule)
            await nursery.start(self.slave_sync.run)
            nursery.start_soon(self._find_ha_master)
            return
        if self.dledger is not None:
            self.slave_sync = SlaveSynchronize(self.parts, client, self.schedule)
            await nursery.start(self.slave_sync.run)
            nursery.start_soon(self._find_master)
            await nursery.start(self.dledger.run)
            return
        if config.is_slave:
            self.slave_sync = SlaveSynchronize(self.parts, client, self.schedule)
            self.ha = self.role.ha = HAClient(self.parts, self.tls, self.slave_sync, self._register_now)
            await nursery.start(self.ha.run)
            await nursery.start(self.slave_sync.run)
            return
        service = HAService(self.parts, self.tls)
        self.ha = self.role.ha = service
        await nursery.start(service.run)
        self.store.replication = service
        self.store.sync_replication = config.broker_role is BrokerRole.SYNC_MASTER

    # -- DLedger ---------------------------------------------------------------------

    def _dledger_node_config(self) -> NodeConfig:
        c = self.config
        raft = RaftConfig(
            election_timeout_ms=c.d_leger_election_timeout_ms,
            heartbeat_interval_ms=c.d_leger_heartbeat_interval_ms,
            push_timeout_ms=c.d_leger_heartbeat_interval_ms,
            lazy_push_ms=c.d_leger_lazy_push_ms,
        )
        return NodeConfig(
            self_id=c.d_leger_self_id,
            peers=c.dledger_peers,
            store=str(c.store_path_root_dir),
            group=c.d_leger_group or c.broker_name,
            bind_host=c.bind_address,
            raft=raft,
            data_file_size=c.mapped_file_size_commit_log,
            sync_flush=c.flush_disk_type is FlushDiskType.SYNC_FLUSH,
        )

    def _dledger_role(self, master: bool) -> None:
        """The DLedger member started or stopped serving as its group's master."""
        c = self.config
        if master:
            role, broker_id = BrokerRole.SYNC_MASTER, MASTER_ID
        else:
            role, broker_id = BrokerRole.SLAVE, slave_id(c.d_leger_self_id, list(c.dledger_peers))
        if (role, broker_id) != (c.broker_role, c.broker_id):
            self.config = c.replace(broker_role=role, broker_id=broker_id)
            log.info("broker %s is now %s (brokerId %d)", c.broker_name, role.value, broker_id)
        if self._leader_scope is not None:
            self._leader_scope.cancel()
            self._leader_scope = None
        if master:
            self._adopt_stored_topics()
            recover_pop_offsets(self.parts)  # the offsets synced from the last master lag its pops
        if master and self._nursery is not None:
            self.schedule.persist()  # what the last master said, as synced, then what the log says
            self.timers.persist()
            self.schedule.load()
            self.timers.load()
            self.transactions.load()
            self._nursery.start_soon(self._master_services)
        if self.registration is not None:
            self.registration.trigger()

    # -- controller mode ------------------------------------------------------------------

    async def _scoped(
        self, run: Any, *, task_status: trio.TaskStatus[trio.CancelScope] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Run ``run`` (a nursery.start-able task) in a cancel scope reported to the caller."""
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                await nursery.start(run)
                task_status.started(scope)

    def _stop_replication(self) -> None:
        """Stop what the last role ran: master services, HA service or client."""
        if self._leader_scope is not None:
            self._leader_scope.cancel()
            self._leader_scope = None
        if self._ha_scope is not None:
            self._ha_scope.cancel()
            self._ha_scope = None
        self.store.dispatch_confirmed_only = False
        if self.store.replication is not None:
            self.store.replication = None
            self.store.sync_replication = False
            self.store.fail_replica_waits()  # a deposed master acknowledges nothing more
        self.ha = self.role.ha = None

    async def _controller_master(self, epoch: int) -> None:
        """The controller elected this broker master of ``epoch`` (ReplicasManager.changeToMaster)."""
        assert self.replicas is not None and self.epochs is not None and self._nursery is not None
        self._stop_replication()
        await self.store.wait_dispatched()
        self.message_store.stop_replica()
        end = self.message_store.max_phy_offset
        if self.epochs.last_epoch < epoch:  # else: a restarted master going on with its epoch
            self.epochs.truncate_suffix_by_offset(end)  # epochs of which this log holds nothing
            self.epochs.append(epoch, end)
        c = self.config
        self.config = c.replace(broker_role=BrokerRole.SYNC_MASTER, broker_id=MASTER_ID)
        self.master_addr = ""
        service = HAService(self.parts, self.tls, role=self.replicas)
        self.ha = self.role.ha = service
        self._ha_scope = await self._nursery.start(self._scoped, service.run)
        self.store.replication = service
        self.store.sync_replication = True
        self.store.replicated_offset = min(self.store.replicated_offset, end)
        self.store.dispatch_confirmed_only = not c.read_un_committed
        self.replicas.confirmed = service.confirm
        service.confirm()
        self._adopt_stored_topics()
        recover_pop_offsets(self.parts)  # the offsets synced from the last master lag its pops
        self.schedule.persist()  # what the last master said, as synced, then what the log says
        self.timers.persist()
        self.schedule.load()
        self.timers.load()
        self.transactions.load()
        await self._nursery.start(self._master_services)
        log.info("broker %s is master of epoch %d from offset %d", c.broker_name, epoch, end)
        self._start_registration()

    async def _controller_slave(self, master_addr: str, epoch: int) -> None:
        """The controller named another master (ReplicasManager.changeToSlave)."""
        assert self.replicas is not None and self.replicas.broker_id is not None
        assert self.slave_sync is not None and self._nursery is not None
        self._stop_replication()
        c = self.config
        self.config = c.replace(broker_role=BrokerRole.SLAVE, broker_id=self.replicas.broker_id)
        self.master_addr = master_addr
        client = HAClient(self.parts, self.tls, self.slave_sync, self._register_now, role=self.replicas)
        self.ha = self.role.ha = client
        self._ha_scope = await self._nursery.start(self._scoped, client.run)
        self._start_registration()
        self.slave_sync.trigger()
        self._leader_changed.set()  # _find_master: register until the name servers name it

    async def _find_ha_master(self) -> None:
        """Controller mode: after a change of master a slave registers every
        FIND_MASTER_INTERVAL until its HA client is connected: the name servers give the new
        master's HA address once that master has registered (HAClient.update_master takes
        only the master the controller named)."""
        while True:
            await self._leader_changed.wait()
            self._leader_changed = trio.Event()
            for _ in range(FIND_MASTER_TRIES):
                ha = self.ha
                if not isinstance(ha, HAClient) or ha.connected or self._leader_changed.is_set():
                    break
                if self.registration is not None:
                    self.registration.trigger()
                await trio.sleep(FIND_MASTER_INTERVAL)

    def _adopt_stored_topics(self) -> None:
        """A new DLedger master may not have synced its predecessor's topic table yet, nor a
        broker back from a crash written its own; a topic whose messages it holds gets a
        config (as many queues as it has), so its route stays."""
        for topic, queue_ids in self.message_store.topics().items():
            if topic not in self.topics:
                self.topics.create_if_absent(topic, max(queue_ids) + 1, PERM_READ | PERM_WRITE)
                log.info("topic %s taken from the store (%d queues)", topic, max(queue_ids) + 1)

    def _register_now(self) -> None:
        """Register again now (a slave that knows no master yet asks for it)."""
        if self.registration is not None:
            self.registration.trigger()

    def _registered(self, master_addr: str | None, ha_addr: str | None) -> None:
        if self.replicas is not None:  # controller mode: the controller names the master
            if isinstance(self.ha, HAClient):
                self.ha.update_master(master_addr, ha_addr)
            return
        before, self.master_addr = self.master_addr, master_addr or ""
        if isinstance(self.ha, HAClient):
            known = bool(self.ha.master_addr)
            self.ha.update_master(master_addr, ha_addr)
            if not known and self.ha.master_addr and self.slave_sync is not None:
                self.slave_sync.trigger()
        elif self.dledger is not None and self.slave_sync is not None and self.config.is_slave:
            # a DLedger follower learns its master here: copy its metadata now, not in 10 s
            if self.master_addr and self.master_addr != before and self.master_addr != self.address:
                self.slave_sync.trigger()

    def _dledger_follows(self) -> None:
        """The DLedger member follows a leader it did not follow before: the master the name
        servers named may be gone, so ask them again until they name the new one
        (``_find_master``), and copy its metadata then (``_registered``)."""
        self.master_addr = ""
        self._leader_changed.set()

    async def _find_master(self) -> None:
        """After a change of leader a DLedger follower re-registers every FIND_MASTER_INTERVAL
        (at most FIND_MASTER_TRIES times) until it has copied the metadata of the master the
        name servers name: the new leader registers only once it has caught up, and until
        then they may name the old one."""
        while True:
            await self._leader_changed.wait()
            self._leader_changed = trio.Event()
            sync = self.slave_sync
            assert sync is not None
            synced = sync.rounds
            for _ in range(FIND_MASTER_TRIES):
                if not self.config.is_slave or sync.rounds > synced or self._leader_changed.is_set():
                    break
                if self.registration is not None:
                    self.registration.trigger()
                await trio.sleep(FIND_MASTER_INTERVAL)
                if self.master_addr and self.master_addr != self.address:
                    sync.trigger()

    def _server_config(self, port: int) -> ServerConfig:
        return ServerConfig(
            host=self.config.bind_address,
            port=port,
            idle_timeout=float(self.config.server_channel_max_idle_time_seconds),
            max_in_flight=MAX_IN_FLIGHT,
            shutdown_grace=SHUTDOWN_GRACE,
            tls_mode=self.tls.mode,
            ssl_context=self.tls.server_context,
            max_connections=self.config.server_max_connections,
            max_connections_per_address=self.config.server_max_connections_per_address,
        )

    async def _start_servers(self, nursery: trio.Nursery) -> None:
        config = self.config
        dispatcher = build_dispatcher(self.parts, self.schedule, self.transactions, self.acl)
        if self.replicas is not None:  # a controller's notices; mqadmin getBrokerEpoch
            dispatcher.register(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, self.replicas.notified)
            dispatcher.register(RequestCode.GET_BROKER_EPOCH_CACHE, self.replicas.epoch_cache, inline=True)
        main = RemotingServer(
            dispatcher,
            self._server_config(config.listen_port),
            on_close=self._connection_closed,
        )
        await nursery.start(main.serve)
        self._servers.append(main)
        assert main.port is not None
        self.identity.port = main.port
        if config.vip_channel_enable:
            vip_port = config.listen_port - 2 if config.listen_port else 0
            vip = RemotingServer(
                build_dispatcher(self.parts, self.schedule, self.transactions, self.acl, vip=True),
                self._server_config(vip_port),
                on_close=self._connection_closed,
            )
            await nursery.start(vip.serve)
            self._servers.append(vip)
            self.vip_port = vip.port

    def shutdown(self) -> None:
        """Begin a clean stop (see the module docstring). Returns at once."""
        self._stop.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def _stop_gracefully(self, nursery: trio.Nursery) -> None:
        self.waiters.wake_all()
        for server in self._servers:
            server.shutdown()
        with trio.move_on_after(SHUTDOWN_GRACE + 1):
            for server in self._servers:
                await server.aclose()
        if self.registration is not None:
            with trio.move_on_after(UNREGISTER_TIMEOUT):
                await self.registration.unregister_all()
            self.registration = None
        nursery.cancel_scope.cancel()

    async def _close(self) -> None:
        """Unregister (if not done), write metadata, close the store. Shielded by the caller."""
        self.waiters.wake_all()
        if self.registration is not None and self.config.namesrv_addr:
            # cancelled from outside: the registration's client is closed, so use a fresh one
            with trio.move_on_after(UNREGISTER_TIMEOUT):
                async with RemotingClient(self.tls.remoting_client_config()) as client:
                    await self.registration.unregister_all(client)
        self.registration = None
        tables: list[tuple[str, Callable[[], None]]] = [
            ("offsets", self.offsets.persist),
            ("orderly POP batches", self.order_info.persist),
            ("topics", self.topics.persist),
            ("subscription groups", self.subscriptions.persist),
        ]
        if hasattr(self, "parts"):  # the store opened and the services were built
            self.transactions.commit_progress()
            tables += [("delay progress", self.schedule.persist), ("timer progress", self.timers.persist)]
        for what, persist in tables:
            try:
                persist()
            except OSError as exc:
                log.error("cannot write %s at shutdown: %s", what, exc)
        store = getattr(self, "message_store", None)
        if store is not None:
            store.close()
        self._stopped.set()
        log.info("broker %s stopped", self.config.broker_name)

    # -- hooks used by the processors -------------------------------------------------

    def _topics_changed(self) -> None:
        if self.registration is not None:
            self.registration.trigger()

    def clock_jumped(self) -> None:
        """`clock_ms` moved by more than time passing (a test's virtual clock, an operator
        setting the time): delivery services re-check what is due now."""
        jumped, self._clock_jumped = self._clock_jumped, trio.Event()
        jumped.set()
        self.timers.wake()

    async def sleep_wall(self, seconds: float) -> None:
        """Sleep `seconds` of `clock_ms` time: at most that long, less if the clock jumps."""
        with trio.move_on_after(seconds):
            await self._clock_jumped.wait()

    def is_in_disk(self, topic: str, queue_id: int, offset: int) -> bool:
        """See ``BrokerParts.is_in_disk``."""
        return self.parts.is_in_disk(topic, queue_id, offset)

    def notify_consumer_ids_changed(self, group: str) -> None:
        """Tell every consumer of `group` to rebalance (NOTIFY_CONSUMER_IDS_CHANGED, oneway),
        in a task of the broker's nursery so the caller does not wait on slow peers."""
        if not self.config.notify_consumer_ids_changed_enable or self._nursery is None:
            return
        conns = [ch.conn for ch in self.clients.consumer_channels(group)]
        if not conns:
            return
        try:
            self._nursery.start_soon(self._notify, group, conns)
        except RuntimeError:
            pass  # the broker is stopping

    async def _notify(self, group: str, conns: list[Any]) -> None:
        for conn in conns:
            request = RemotingCommand(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, language=LanguageCode.JAVA
            )
            try:
                await conn.invoke_oneway(request, NOTIFY_TIMEOUT)
            except RemotingError as exc:
                log.info("cannot notify %s of group %s: %s", conn.remote_address, group, exc)

    def _connection_closed(self, conn: Connection) -> None:
        for group in self.clients.connection_closed(conn):
            config = self.subscriptions.get(group)
            if config is None or config.notify_consumer_ids_changed_enable:
                self.notify_consumer_ids_changed(group)

    # -- background tasks -------------------------------------------------------------

    async def _housekeeping(self) -> None:
        day = time.localtime().tm_yday
        while True:
            await trio.sleep(min(CLIENT_SCAN_INTERVAL, SAMPLE_INTERVAL))
            for group in self.clients.scan_expired():
                self.notify_consumer_ids_changed(group)
            self.stats.sample()
            self.order_info.clean(self._read_queue_nums, lambda group: self.subscriptions.get(group) is not None)
            today = time.localtime().tm_yday
            if today != day:
                day = today
                self.stats.new_day()

    def _read_queue_nums(self, topic: str) -> int | None:
        tc = self.topics.get(topic)
        return None if tc is None else tc.read_queue_nums


class _Arrivals:
    """The store's ArrivalListener: parked pulls first, then the delivery services."""

    def __init__(self, listeners: list[Any]) -> None:
        self._listeners = listeners
        self._after = [f for f in (getattr(listener, "dispatched", None) for listener in listeners) if f is not None]

    def dispatched(self) -> None:
        for after in self._after:
            after()

    def arriving(
        self,
        topic: str,
        queue_id: int,
        logic_offset: int,
        tags_code: int,
        store_timestamp: int,
        properties: dict[str, str],
    ) -> None:
        for listener in self._listeners:
            listener.arriving(topic, queue_id, logic_offset, tags_code, store_timestamp, properties)

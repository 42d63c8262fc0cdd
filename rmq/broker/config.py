"""BrokerConfig: the broker's settings, read once from RocketMQ's `broker.conf`.

`broker.conf` is a Java properties file with RocketMQ's key names (brokerClusterName,
brokerName, listenPort, storePathRootDir, ...). RocketMQ spreads them over BrokerConfig,
NettyServerConfig and MessageStoreConfig; here they are one frozen object, validated
in `from_properties` and trusted everywhere after.

A file RocketMQ's mqbroker starts with starts this broker the same way: keys RocketMQ has
that we do not act on (thread-pool sizes and the like) are accepted and named in one INFO
line, unknown keys get a WARNING naming the closest known key (a typo should not stop a
broker, but should be seen), and the values RocketMQ's BrokerStartup and MessageStoreConfig
correct in silence are corrected here too, in one log line each (`_settled`). A value that
cannot be used raises ConfigError naming the key.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmq import rocketmq_keys
from rmq.dledger.peers import parse_peers
from rmq.protocol import javaprops
from rmq.protocol.constants import MASTER_ID, TRACE_TOPIC
from rmq.remoting.tlsconfig import INERT_KEYS as TLS_INERT_KEYS
from rmq.remoting.tlsconfig import NEED_CLIENT_AUTH, TLS_MODES, TlsConfigError, with_tls_config_file
from rmq.store.config import FlushDiskType

log = logging.getLogger("rmq.broker.config")

CQ_UNIT = 20  # bytes of a consume-queue entry
# RocketMQ's other metricsExporterType values (and numbers), accepted and not served
_UNSERVED_EXPORTERS = ("OTLP_GRPC", "1", "LOG", "3")


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key."""


def slave_id(self_id: str, peers: list[str]) -> int:
    """The brokerId a member registers with while it follows: RocketMQ's ``n<k>`` → k + 1
    (DLedgerCommitLog.getId); other names count by their place in dLegerPeers."""
    if self_id[:1].isalpha() and self_id[1:].isdigit():
        return int(self_id[1:]) + 1
    return peers.index(self_id) + 1


def parse_dledger_peers(text: str) -> dict[str, str]:
    """RocketMQ's dLegerPeers, "n0-127.0.0.1:40911;n1-127.0.0.1:40912" → {id: "host:port"}."""
    try:
        return parse_peers(text)
    except ValueError as exc:
        raise ConfigError(f"broker config dLegerPeers: {exc}") from None


class BrokerRole(enum.Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


def _local_address() -> str:
    """The address other hosts reach us by, as RocketMQ's RemotingUtil.getLocalAddress picks it.

    Connecting a UDP socket sends nothing; it only asks the kernel for the outgoing
    interface. Without a route we fall back to the host name, then loopback.
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("8.8.8.8", 53))
            ip = s.getsockname()[0]
            if ip and not ip.startswith("0."):
                return str(ip)
    except OSError:
        pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


_DELAY_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DELAY_LEVEL = re.compile(r"(\d+)([smhd])")
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """`"1s 5s 1m"` → (1000, 5000, 60000); ValueError on a bad token."""
    out = []
    for token in text.split():
        m = _DELAY_LEVEL.fullmatch(token)
        if not m:
            raise ValueError(f"bad delay level {token!r} (want a number and one of s, m, h, d)")
        out.append(int(m.group(1)) * _DELAY_UNITS_MS[m.group(2)])
    if not out:
        raise ValueError("no delay levels")
    return tuple(out)


# A controller-mode broker's brokerId before the controller assigned one (replicas.py).
CONTROLLER_UNKNOWN_ID = -1


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Every setting the broker acts on. Field `snake_case` ⇄ conf key `camelCase`."""

    # identity and cluster
    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = field(default_factory=socket.gethostname)
    broker_id: int = MASTER_ID
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    namesrv_addr: tuple[str, ...] = ()
    broker_ip1: str = field(default_factory=_local_address)
    broker_ip2: str = ""  # "" = same as broker_ip1
    broker_permission: int = 6
    register_name_server_period: int = 30_000  # ms
    region_id: str = "DefaultRegion"
    trace_on: bool = True

    # network
    listen_port: int = 10911  # 0 = any free port (tests); the VIP port is then free too
    bind_address: str = "0.0.0.0"
    ha_listen_port: int = 0  # 0 = listen_port + 1
    vip_channel_enable: bool = True  # serve listen_port - 2 as RocketMQ's fast channel
    server_channel_max_idle_time_seconds: int = 120
    server_max_connections: int = 10_000  # per port (main, VIP); 0 = no limit
    server_max_connections_per_address: int = 0  # per port and client IP; 0 = no limit
    busy_poll_micros: int = 0  # rmq's own: µs the event loop polls before it sleeps (remoting/busypoll.py); 0 = off

    # replication (master/slave HA, PROTOCOL.md 9)
    ha_master_address: str = ""  # a slave's master HA address; "" = learn it from the name server
    ha_send_heartbeat_interval: int = 5000  # ms between a slave's reports when idle
    ha_housekeeping_interval: int = 20_000  # ms of silence after which an HA connection closes
    ha_transfer_batch_size: int = 32 * 1024  # bytes of CommitLog per chunk
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024  # bytes: SYNC_MASTER answers 11 beyond this
    access_message_in_memory_max_ratio: int = 40  # percent of RAM behind the log end "in memory"

    # DLedger groups (docs/ha.md): the CommitLog replicated by Raft, leader = master
    enable_d_leger_commit_log: bool = False
    d_leger_group: str = ""  # "" = brokerName
    d_leger_peers: str = ""  # "n0-host:port;n1-host:port;n2-host:port" (DLedger ports)
    d_leger_self_id: str = ""
    preferred_leader_id: str = ""  # leadership is handed to this member when it can take it
    d_leger_election_timeout_ms: int = 3000  # randomized within [t, 2t) per election
    d_leger_heartbeat_interval_ms: int = 1000
    # rmq's own: followers a commit does not wait for get new entries at most this often
    # (raft/core.py, lazy_push_ms); 0 = at once
    d_leger_lazy_push_ms: int = 200

    # controller mode (RocketMQ 5, docs/controller.md): a controller group elects the master
    enable_controller_mode: bool = False
    controller_addr: str = ""  # "host:port;host:port": the controller members
    sync_broker_metadata_period: int = 5000  # ms between asks of the group's master and SyncStateSet
    check_sync_state_set_period: int = 5000  # ms between a master's checks of its SyncStateSet
    sync_controller_metadata_period: int = 10_000  # ms between asks of the controller leader
    broker_heartbeat_interval: int = 1000  # ms between heartbeats to every controller member
    send_heartbeat_timeout_millis: int = 1000
    controller_heart_beat_timeout_mills: int = 10_000  # ms of silence after which the controller deems us dead
    broker_election_priority: int = 2**31 - 1  # the lower, the likelier this broker is elected
    ha_max_time_slave_not_catchup: int = 15_000  # ms a slave may lag before it leaves the SyncStateSet
    all_ack_in_sync_state_set: bool = False  # a send waits for every replica of the SyncStateSet
    in_sync_replicas: int = 1  # replicas (master included) a send waits for, without allAckInSyncStateSet
    min_in_sync_replicas: int = 1  # fewer replicas in sync than this: sends are refused
    enable_auto_in_sync_replicas: bool = False  # wait for at most as many as are in sync
    store_path_epoch_file: Path | None = None  # None = <root>/epochFileCheckpoint
    store_path_broker_identity: Path | None = None  # None = <root>/brokerIdentity
    read_un_committed: bool = False  # consumers may see what not every in-sync replica holds yet

    # store
    store_path_root_dir: Path = field(default_factory=lambda: Path.home() / "store")
    store_path_commit_log: Path | None = None  # None = <root>/commitlog
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    sync_flush_timeout: int = 5000  # ms
    delete_when: str = "04"
    file_reserved_time: int = 72  # hours
    # RocketMQ's levels of disk use, percent (docs/operations.md, "Disk space")
    disk_max_used_space_ratio: int = 75  # expired files are deleted at once
    disk_space_clean_forcibly_ratio: int = 85  # files not expired too, with clean_file_forcibly_enable
    disk_space_warning_level_ratio: int = 90  # sends are refused
    clean_file_forcibly_enable: bool = True
    warm_maped_file_enable: bool = False  # allocate CommitLog and consume queue files when made
    # rmq's own, SYNC_FLUSH: sync a request in flight alone on the event loop (docs/operations.md)
    lone_sync_inline: bool = True
    max_message_size: int = 4 * 1024 * 1024
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    max_msgs_num_batch: int = 64
    default_query_max_num: int = 32
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    flush_interval_commit_log: int = 500  # ms, ASYNC_FLUSH
    flush_interval_consume_queue: int = 1000  # ms
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000  # ms
    flush_interval_index: int = 10_000  # ms; rmq's own (RocketMQ syncs an index file when full)
    clean_resource_interval: int = 10_000  # ms
    check_crc_on_recover: bool = True
    message_index_enable: bool = True
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4

    # topics and groups
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = TRACE_TOPIC
    reject_transaction_message: bool = False
    store_reply_message_enable: bool = True  # replies are stored as well as pushed to their requester

    # consumers
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    enable_property_filter: bool = False
    slave_read_enable: bool = False
    notify_consumer_ids_changed_enable: bool = True

    # POP consumption (RocketMQ 5.x, docs/pop.md)
    revive_queue_num: int = 8  # queues of rmq_sys_REVIVE_LOG_<cluster>, one revive task each
    revive_interval: int = 1000  # ms a revive task rests when it found nothing due
    pop_from_retry_probability: int = 20  # % of pops that read the POP retry topic first
    max_pop_polling_size: int = 100_000  # pops parked at once; more are answered POLLING_FULL

    # transactions
    transaction_time_out: int = 6000  # ms
    transaction_check_interval: int = 60_000  # ms
    transaction_check_max: int = 15

    # timer messages (RocketMQ 5: TIMER_DELIVER_MS, TIMER_DELAY_SEC / _MS, __STARTDELIVERTIME)
    timer_wheel_enable: bool = True
    timer_max_delay_sec: int = 3 * 24 * 3600

    # TLS (RocketMQ's tls.* keys, docs/security.md): main, VIP and HA ports; this broker's own
    # connections to name servers and to its master with tls.enable
    tls_server_mode: str = "disabled"  # disabled, permissive or enforcing
    tls_server_cert_path: str = ""
    tls_server_key_path: str = ""
    tls_server_key_password: str = ""
    tls_server_need_client_auth: str = "none"  # none, optional or require
    tls_server_trust_cert_path: str = ""  # "" = the system's CAs
    tls_enable: bool = False
    tls_client_cert_path: str = ""
    tls_client_key_path: str = ""
    tls_client_key_password: str = ""
    tls_client_trust_cert_path: str = ""  # "" = the system's CAs
    tls_client_auth_server: bool = True
    tls_config_file: str = ""  # a tls.properties with any of the above; keys set here win

    # access control (ACL 1.0: accounts and white lists in plain_acl.yml, docs/security.md)
    acl_enable: bool = False
    rocketmq_home: str = ""  # "" = $ROCKETMQ_HOME
    acl_plain_file: str = ""  # "" = <rocketmqHome>/conf/plain_acl.yml; relative paths are under rocketmqHome
    acl_require_signed_request_code: bool = False  # rmq's own: the signature must cover the code (docs/security.md)

    # metrics (RocketMQ 5.x's keys; docs/operations.md "Metrics")
    metrics_exporter_type: str = "DISABLE"  # DISABLE or PROM (a Prometheus endpoint)
    metrics_prom_exporter_host: str = ""  # "" = brokerIP1
    metrics_prom_exporter_port: int = 5557

    # -- derived ------------------------------------------------------------------------

    @property
    def commit_log_dir(self) -> Path:
        return self.store_path_commit_log or self.store_path_root_dir / "commitlog"

    @property
    def epoch_file(self) -> Path:
        return self.store_path_epoch_file or self.store_path_root_dir / "epochFileCheckpoint"

    @property
    def broker_identity_file(self) -> Path:
        return self.store_path_broker_identity or self.store_path_root_dir / "brokerIdentity"

    @property
    def controller_addrs(self) -> list[str]:
        return [a.strip() for a in self.controller_addr.replace(",", ";").split(";") if a.strip()]

    @property
    def config_dir(self) -> Path:
        return self.store_path_root_dir / "config"

    @property
    def advertised_ip2(self) -> str:
        return self.broker_ip2 or self.broker_ip1

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        return parse_delay_levels(self.message_delay_level)

    @property
    def acl_file(self) -> Path | None:
        """The plain_acl.yml the ACL reads (aclPlainFile, else <rocketmqHome>/conf/plain_acl.yml);
        None when neither rocketmqHome nor aclPlainFile is set."""
        home = Path(self.rocketmq_home).expanduser() if self.rocketmq_home else None
        if self.acl_plain_file:
            path = Path(self.acl_plain_file).expanduser()
            return path if path.is_absolute() or home is None else home / path
        return home / "conf" / "plain_acl.yml" if home is not None else None

    @property
    def prometheus_enabled(self) -> bool:
        """metricsExporterType=PROM (or RocketMQ's number for it, 2)."""
        return self.metrics_exporter_type.upper() in ("PROM", "2")

    @property
    def is_slave(self) -> bool:
        return self.broker_role is BrokerRole.SLAVE

    @property
    def ha_port(self) -> int:
        """The HA port to bind: haListenPort, else listenPort + 1 (0 = any, with listenPort 0)."""
        if self.ha_listen_port:
            return self.ha_listen_port
        return self.listen_port + 1 if self.listen_port else 0

    @property
    def dledger_peers(self) -> dict[str, str]:
        """dLegerPeers as {selfId: "host:port"}."""
        return parse_dledger_peers(self.d_leger_peers)

    def _validate_dledger(self, bad: Any) -> None:
        peers = self.dledger_peers
        if not peers:
            raise bad("dLegerPeers", "enableDLegerCommitLog needs the group's members, n0-host:port;n1-host:port;...")
        if self.d_leger_self_id not in peers:
            raise bad("dLegerSelfId", f"{self.d_leger_self_id!r} is not one of dLegerPeers ({', '.join(peers)})")
        if self.preferred_leader_id and self.preferred_leader_id not in peers:
            raise bad("preferredLeaderId", f"{self.preferred_leader_id!r} is not one of dLegerPeers")
        if not 100 <= self.d_leger_election_timeout_ms <= 600_000:
            raise bad("dLegerElectionTimeoutMs", "must be 100..600000 ms")
        if not 10 <= self.d_leger_heartbeat_interval_ms < self.d_leger_election_timeout_ms:
            raise bad("dLegerHeartbeatIntervalMs", "must be at least 10 ms and below dLegerElectionTimeoutMs")
        if not 0 <= self.d_leger_lazy_push_ms <= 10_000:
            raise bad("dLegerLazyPushMs", "must be 0 (off) to 10000 ms")

    # -- reading ------------------------------------------------------------------------

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], *, environ: Mapping[str, str] | None = None, source: str = "broker.conf"
    ) -> BrokerConfig:
        """Build from `broker.conf` keys. ConfigError names the first bad key.

        `namesrvAddr` falls back to the NAMESRV_ADDR environment variable and `rocketmqHome`
        to ROCKETMQ_HOME, as in RocketMQ. Keys not acted on, and values corrected as RocketMQ
        corrects them, are logged under `source`.
        """
        environ = os.environ if environ is None else environ
        kwargs: dict[str, Any] = {}
        try:
            props = with_tls_config_file(props, _TLS_KEYS)
        except TlsConfigError as exc:
            raise ConfigError(f"broker config {exc.key}: {exc.message}") from None
        for key, raw in props.items():
            spec = _SPECS.get(key)
            if spec is not None:
                kwargs[spec.attr] = spec.parse(key, raw.strip())
        if "namesrv_addr" not in kwargs and environ.get("NAMESRV_ADDR"):
            kwargs["namesrv_addr"] = _SPECS["namesrvAddr"].parse("NAMESRV_ADDR", environ["NAMESRV_ADDR"])
        if "rocketmq_home" not in kwargs and environ.get("ROCKETMQ_HOME"):
            kwargs["rocketmq_home"] = environ["ROCKETMQ_HOME"].strip()
        config = cls(**kwargs)._settled(props, source)
        rocketmq_keys.report_unused(
            (key for key in props if key not in _SPECS),
            honoured=_SPECS,
            accepted=ACCEPTED_KEYS,
            source=source,
            logger=log,
        )
        config._validate()
        return config

    def _settled(self, props: Mapping[str, str], source: str) -> BrokerConfig:
        """This config as RocketMQ's BrokerStartup and MessageStoreConfig make it.

        What they refuse is refused (ConfigError); what they correct in silence is corrected,
        in one log line each: a WARNING where the file contradicts itself, INFO where a key
        is ignored by design.
        """
        changes = self._settled_role(props, source)
        cq_size = self.mapped_file_size_consume_queue
        if cq_size > 0 and cq_size % CQ_UNIT:
            changes["mapped_file_size_consume_queue"] = cq_size + CQ_UNIT - cq_size % CQ_UNIT
            log.warning(
                "%s: mappedFileSizeConsumeQueue=%d rounded up to %d, a multiple of the %d-byte entry, as RocketMQ does",
                source,
                cq_size,
                changes["mapped_file_size_consume_queue"],
                CQ_UNIT,
            )
        ratio = self.disk_max_used_space_ratio
        if not 10 <= ratio <= 95:
            changes["disk_max_used_space_ratio"] = min(max(ratio, 10), 95)
            log.warning(
                "%s: diskMaxUsedSpaceRatio=%d taken as %d (10..95), as RocketMQ does",
                source,
                ratio,
                changes["disk_max_used_space_ratio"],
            )
        if self.metrics_exporter_type.upper() in _UNSERVED_EXPORTERS:
            log.warning(
                "%s: metricsExporterType=%s: rmq serves metrics only as PROM; none are exported",
                source,
                self.metrics_exporter_type,
            )
        return dataclasses.replace(self, **changes) if changes else self

    def _settled_role(self, props: Mapping[str, str], source: str) -> dict[str, Any]:
        """The changes BrokerStartup makes to brokerRole, brokerId and a master's
        haMasterAddress, each logged under `source`; ConfigError for what it refuses."""
        if self.enable_controller_mode:
            if self.enable_d_leger_commit_log:
                raise ConfigError(
                    "broker config enableControllerMode: enableControllerMode and enableDLegerCommitLog "
                    "cannot both be true (RocketMQ refuses this too)"
                )
            if not self.controller_addrs:
                raise ConfigError("broker config controllerAddr: required with enableControllerMode=true")
            # A broker is a slave until the controller names its role (replicas.py): one that
            # acted as a master first could acknowledge sends the elected master never has.
            given = [key for key in ("brokerRole", "brokerId") if key in props]
            if given:
                log.info(
                    "%s: %s ignored with enableControllerMode=true, as RocketMQ does: the controller assigns "
                    "the brokerId and elects the master",
                    source,
                    " and ".join(given),
                )
            return {"broker_role": BrokerRole.SLAVE, "broker_id": CONTROLLER_UNKNOWN_ID}
        if self.is_slave and self.broker_id <= 0 and not self.enable_controller_mode:
            raise ConfigError(
                f"broker config brokerId: a SLAVE's brokerId must be > 0, not {self.broker_id} "
                "(RocketMQ refuses it too; a master is brokerId 0 with brokerRole ASYNC_MASTER or SYNC_MASTER)"
            )
        changes: dict[str, Any] = {}
        if self.enable_d_leger_commit_log:
            peers = self.dledger_peers
            if self.d_leger_self_id in peers:  # else _validate_dledger names dLegerSelfId
                # A member is a follower until its group elects it (controller._dledger_role):
                # one that acted as a master before it knew its role would acknowledge sends
                # it then loses when it follows its leader.
                changes.update(broker_role=BrokerRole.SLAVE, broker_id=slave_id(self.d_leger_self_id, list(peers)))
                given = [key for key in ("brokerRole", "brokerId") if key in props]
                if given:
                    log.info(
                        "%s: %s ignored with enableDLegerCommitLog=true, as RocketMQ does: the group's election "
                        "makes a member master (brokerId 0) or follower; %s starts as a follower (brokerId %d)",
                        source,
                        " and ".join(given),
                        self.d_leger_self_id,
                        changes["broker_id"],
                    )
        elif not self.is_slave:
            if self.broker_id != MASTER_ID:
                log.warning(
                    "%s: brokerId=%d with brokerRole=%s: a master is brokerId 0; taken as 0, as RocketMQ does",
                    source,
                    self.broker_id,
                    self.broker_role.value,
                )
                changes["broker_id"] = MASTER_ID
            if self.ha_master_address:
                log.warning(
                    "%s: haMasterAddress ignored: brokerRole=%s is a master, which follows no one, as RocketMQ does",
                    source,
                    self.broker_role.value,
                )
                changes["ha_master_address"] = ""
        return changes

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, str] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        """Read a conf file (if given), then apply command-line `overrides` (same key names)."""
        props: dict[str, str] = {}
        if path is not None:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
            props.update(javaprops.parse(text))
        props.update(overrides or {})
        return cls.from_properties(props, environ=environ, source="broker.conf" if path is None else str(path))

    def replace(self, **changes: Any) -> BrokerConfig:
        config = dataclasses.replace(self, **changes)
        config._validate()
        return config

    def _validate(self) -> None:
        def bad(key: str, why: str) -> ConfigError:
            return ConfigError(f"broker config {key}: {why}")

        if not (0 <= self.listen_port <= 65535):
            raise bad("listenPort", f"{self.listen_port} is not a port number")
        if self.vip_channel_enable and 0 < self.listen_port < 3:
            raise bad("listenPort", f"{self.listen_port} leaves no room for the VIP port (listenPort - 2)")
        for name in ("server_max_connections", "server_max_connections_per_address"):
            if getattr(self, name) < 0:
                raise bad(_camel(name), "must be >= 0 (0 = no limit)")
        if not 0 <= self.busy_poll_micros <= 10_000:
            raise bad("busyPollMicros", f"{self.busy_poll_micros} is not in 0..10000 µs")
        if not (0 <= self.ha_listen_port <= 65535):
            raise bad("haListenPort", f"{self.ha_listen_port} is not a port number")
        if self.is_slave and self.broker_id <= 0 and not self.enable_controller_mode:
            raise bad("brokerId", f"a SLAVE's brokerId must be > 0, not {self.broker_id} (brokerRole=SLAVE)")
        if not self.is_slave and self.broker_id != MASTER_ID:
            raise bad(
                "brokerId",
                f"a master's brokerId must be 0, not {self.broker_id} (brokerRole={self.broker_role.value})",
            )
        if self.listen_port and self.ha_port in (
            self.listen_port,
            self.listen_port - 2 if self.vip_channel_enable else -1,
        ):
            raise bad("haListenPort", f"{self.ha_port} collides with listenPort {self.listen_port} or its VIP port")
        if self.ha_master_address:
            host, sep, port = self.ha_master_address.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
                raise bad("haMasterAddress", f"{self.ha_master_address!r} is not host:port")
            if not self.is_slave:
                raise bad("haMasterAddress", "only a SLAVE follows a master (brokerRole is not SLAVE)")
        if self.enable_d_leger_commit_log:
            self._validate_dledger(bad)
        if self.acl_enable and self.acl_file is None:
            raise bad(
                "aclEnable",
                "the ACL needs its plain_acl.yml: set rocketmqHome (or ROCKETMQ_HOME) for "
                "<rocketmqHome>/conf/plain_acl.yml, or aclPlainFile",
            )
        if self.tls_server_mode.lower() not in TLS_MODES:
            raise bad("tls.server.mode", f"{self.tls_server_mode!r} is not one of {', '.join(TLS_MODES)}")
        if self.tls_server_need_client_auth.lower() not in NEED_CLIENT_AUTH:
            raise bad(
                "tls.server.need.client.auth",
                f"{self.tls_server_need_client_auth!r} is not one of {', '.join(NEED_CLIENT_AUTH)}",
            )
        if self.tls_server_mode.lower() != "disabled" and not (self.tls_server_cert_path and self.tls_server_key_path):
            raise bad("tls.server.mode", f"{self.tls_server_mode} TLS needs tls.server.certPath and tls.server.keyPath")
        if not 0 < self.access_message_in_memory_max_ratio <= 100:
            raise bad("accessMessageInMemoryMaxRatio", "must be a percentage in 1..100")
        if not _NAME.fullmatch(self.broker_name):
            raise bad("brokerName", f"{self.broker_name!r} must be letters, digits, '-', '_' or '.'")
        if not _NAME.fullmatch(self.broker_cluster_name):
            raise bad("brokerClusterName", f"{self.broker_cluster_name!r} must be letters, digits, '-', '_' or '.'")
        for addr in self.namesrv_addr:
            host, sep, port = addr.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
                raise bad("namesrvAddr", f"{addr!r} is not host:port")
        for name in (
            "mapped_file_size_commit_log",
            "mapped_file_size_consume_queue",
            "max_message_size",
            "default_topic_queue_nums",
            "register_name_server_period",
            "short_polling_time_mills",
            "max_msgs_num_batch",
            "default_query_max_num",
            "sync_flush_timeout",
            "flush_interval_commit_log",
            "flush_interval_consume_queue",
            "flush_consume_queue_thorough_interval",
            "flush_interval_index",
            "clean_resource_interval",
            "max_hash_slot_num",
            "max_index_num",
            "timer_max_delay_sec",
            "revive_queue_num",
            "revive_interval",
            "transaction_check_interval",
            "transaction_time_out",
            "ha_send_heartbeat_interval",
            "ha_housekeeping_interval",
            "ha_transfer_batch_size",
            "ha_slave_fallbehind_max",
            "sync_broker_metadata_period",
            "check_sync_state_set_period",
            "sync_controller_metadata_period",
            "broker_heartbeat_interval",
            "send_heartbeat_timeout_millis",
            "controller_heart_beat_timeout_mills",
            "ha_max_time_slave_not_catchup",
            "in_sync_replicas",
            "min_in_sync_replicas",
        ):
            if getattr(self, name) <= 0:
                raise bad(_camel(name), "must be > 0")
        if not 0 <= self.pop_from_retry_probability <= 100:
            raise bad("popFromRetryProbability", "must be a percentage in 0..100")
        if self.flush_consume_queue_least_pages < 0:
            raise bad("flushConsumeQueueLeastPages", "must be >= 0")
        if self.mapped_file_size_consume_queue % CQ_UNIT:
            raise bad("mappedFileSizeConsumeQueue", "must be a multiple of 20 (the consume-queue entry size)")
        if not 0 <= self.broker_permission <= 15:
            raise bad("brokerPermission", f"{self.broker_permission} is not a permission mask")
        if not 10 <= self.disk_max_used_space_ratio <= 95:
            raise bad("diskMaxUsedSpaceRatio", "must be between 10 and 95")
        # RocketMQ holds these two within the same bounds (CleanCommitLogService)
        if not 30 <= self.disk_space_clean_forcibly_ratio <= 85:
            raise bad("diskSpaceCleanForciblyRatio", "must be between 30 and 85")
        if not 35 <= self.disk_space_warning_level_ratio <= 90:
            raise bad("diskSpaceWarningLevelRatio", "must be between 35 and 90")
        try:
            parse_delay_levels(self.message_delay_level)
        except ValueError as exc:
            raise bad("messageDelayLevel", str(exc)) from None
        if self.metrics_exporter_type.upper() not in ("DISABLE", "PROM", "0", "2", *_UNSERVED_EXPORTERS):
            raise bad("metricsExporterType", f"{self.metrics_exporter_type!r} is not DISABLE, PROM, OTLP_GRPC or LOG")
        if not 0 <= self.metrics_prom_exporter_port <= 65535:
            raise bad("metricsPromExporterPort", f"{self.metrics_prom_exporter_port} is not a port number")
        hours = self.delete_when.split(";")
        if not all(h.strip().isdigit() and int(h) < 24 for h in hours):
            raise bad("deleteWhen", f"{self.delete_when!r} is not hours of the day like 04 or 04;16")

    # -- writing (mqbroker -p) ------------------------------------------------------------

    def to_properties(self) -> dict[str, str]:
        """Every setting under its conf key, as `-p` prints them."""
        out = {key: spec.format(getattr(self, spec.attr)) for key, spec in _SPECS.items()}
        # Show what the defaults resolve to, as RocketMQ's -p does with its computed paths.
        out["storePathCommitLog"] = str(self.commit_log_dir)
        out["storePathEpochFile"] = str(self.epoch_file)
        out["storePathBrokerIdentity"] = str(self.broker_identity_file)
        out["brokerIP2"] = self.advertised_ip2
        out["haListenPort"] = str(self.ha_port)
        for key in ("tls.server.keyPassword", "tls.client.keyPassword"):
            if out[key]:
                out[key] = "******"  # -p and GET_BROKER_CONFIG show that one is set, not what it is
        return dict(sorted(out.items()))


_NAME = re.compile(r"[A-Za-z0-9_.\-]+")

# Keys RocketMQ has: those this broker does not act on (not in _SPECS) are accepted, and named
# in one INFO line at start-up (rocketmq_keys.report_unused). Below: older RocketMQ spellings.
ACCEPTED_KEYS = rocketmq_keys.BROKER.union(TLS_INERT_KEYS) | frozenset(
    """
    sendMessageThreadPoolNums pullMessageThreadPoolNums processReplyMessageThreadPoolNums
    queryMessageThreadPoolNums adminBrokerThreadPoolNums clientManageThreadPoolNums
    consumerManageThreadPoolNums heartbeatThreadPoolNums endTransactionThreadPoolNums
    sendThreadPoolQueueCapacity pullThreadPoolQueueCapacity replyThreadPoolQueueCapacity
    queryThreadPoolQueueCapacity clientManagerThreadPoolQueueCapacity
    consumerManagerThreadPoolQueueCapacity heartbeatThreadPoolQueueCapacity
    endTransactionPoolQueueCapacity serverWorkerThreads serverCallbackExecutorThreads
    serverSelectorThreads serverOnewaySemaphoreValue serverAsyncSemaphoreValue
    serverSocketSndBufSize serverSocketRcvBufSize serverPooledByteBufAllocatorEnable
    useEpollNativeSelector clientWorkerThreads clientCallbackExecutorThreads
    useReentrantLockWhenPutMessage waitTimeMillsInSendQueue waitTimeMillsInPullQueue
    waitTimeMillsInHeartbeatQueue waitTimeMillsInTransactionQueue osPageCacheBusyTimeOutMills
    brokerFastFailureEnable flushCommitLogTimed flushCommitLogLeastPages flushCommitLogThoroughInterval
    commitIntervalCommitLog commitCommitLogLeastPages
    transientStorePoolEnable transientStorePoolSize fastFailIfNoBufferInStorePool
    mapedFileSizeCommitLog mapedFileSizeConsumeQueue
    deleteCommitLogFilesInterval deleteConsumeQueueFilesInterval destroyMapedFileIntervalForcibly
    redeleteHangedFileInterval diskFallRecorded messageIndexSafe
    slaveTimeout offsetCheckInSlave debugLockEnable duplicationEnable
    storePathConsumeQueue storePathIndex storeCheckpoint abortFile
    fetchNamesrvAddrByAddressServer filterServerNums filterSupportRetry enableCalcFilterBitMap
    enableConsumeQueueExt mappedFileSizeConsumeQueueExt bitMapLengthConsumeQueueExt
    compressedRegister forceRegister registerBrokerTimeoutMills
    isEnableBatchPush
    autoDeleteUnusedStats startAcceptSendRequestTimeStamp commercialEnable highSpeedMode
    commercialTimerCount commercialTransCount commercialBigCount transferMsgByHeap
    maxErrorRateOfBloomFilter expectConsumerNumUseFilter filterDataCleanTimeSpan
    enableDetailStat
    """.split()
)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


# Conf keys whose camelCase is not the mechanical one.
_IRREGULAR = {
    "broker_ip1": "brokerIP1",
    "broker_ip2": "brokerIP2",
    "check_crc_on_recover": "checkCRCOnRecover",
    "tls_server_mode": "tls.server.mode",
    "tls_server_cert_path": "tls.server.certPath",
    "tls_server_key_path": "tls.server.keyPath",
    "tls_server_key_password": "tls.server.keyPassword",
    "tls_server_need_client_auth": "tls.server.need.client.auth",
    "tls_server_trust_cert_path": "tls.server.trustCertPath",
    "tls_enable": "tls.enable",
    "tls_client_cert_path": "tls.client.certPath",
    "tls_client_key_path": "tls.client.keyPath",
    "tls_client_key_password": "tls.client.keyPassword",
    "tls_client_trust_cert_path": "tls.client.trustCertPath",
    "tls_client_auth_server": "tls.client.authServer",
    "tls_config_file": "tls.config.file",
}
_TLS_KEYS = frozenset(key for key in _IRREGULAR.values() if key.startswith("tls."))


@dataclass(frozen=True, slots=True)
class _Spec:
    attr: str
    kind: Any  # int, bool, str, Path, an Enum class, or tuple for ';'-separated lists

    def parse(self, key: str, raw: str) -> Any:
        kind = self.kind
        if kind is bool:
            low = raw.lower()
            if low not in ("true", "false"):
                raise ConfigError(f"broker config {key}: {raw!r} is not true or false")
            return low == "true"
        if kind is int:
            try:
                return int(raw)
            except ValueError:
                raise ConfigError(f"broker config {key}: {raw!r} is not an integer") from None
        if kind is Path:
            if not raw:
                raise ConfigError(f"broker config {key}: empty path")
            return Path(raw).expanduser()
        if kind is tuple:
            return tuple(part.strip() for part in raw.split(";") if part.strip())
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            try:
                return kind(raw.upper())
            except ValueError:
                names = ", ".join(m.value for m in kind)
                raise ConfigError(f"broker config {key}: {raw!r} is not one of {names}") from None
        return raw

    def format(self, value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, enum.Enum):
            return str(value.value)
        if isinstance(value, tuple):
            return ";".join(value)
        return "" if value is None else str(value)


def _build_specs() -> dict[str, _Spec]:
    hints = {
        "int": int,
        "bool": bool,
        "str": str,
        "Path": Path,
        "Path | None": Path,
        "tuple[str, ...]": tuple,
        "FlushDiskType": FlushDiskType,
        "BrokerRole": BrokerRole,
    }
    return {
        _IRREGULAR.get(f.name, _camel(f.name)): _Spec(f.name, hints[str(f.type)])
        for f in dataclasses.fields(BrokerConfig)
    }


_SPECS = _build_specs()

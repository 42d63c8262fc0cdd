"""ControllerConfig: what a controller member starts with, from RocketMQ's key names.

RocketMQ's ControllerConfig keys rmq acts on (defaults as RocketMQ's):

  controllerDLegerGroup, controllerDLegerPeers ("n0-host:port;n1-host:port;..."),
  controllerDLegerSelfId: the controller group; each member serves the Raft messages and
  the controller's requests on its port in the peers, as RocketMQ's controller serves
  both on its DLedger server.
  controllerStorePath: where the member's Raft log lives (RocketMQ's empty default is
  taken as ~/DledgerController here).
  mappedFileSize: the log's data file size (1 GiB).
  enableElectUncleanMaster (false), notifyBrokerRoleChanged (true),
  scanNotActiveBrokerInterval (5000 ms), scanInactiveMasterInterval (5000 ms),
  electMasterMaxRetryCount (3); bindAddress (NettyServerConfig's, 0.0.0.0).
  configBlackList ("configBlackList;configStorePath"): keys UPDATE_CONTROLLER_CONFIG may not
  change (configBlackList, configStorePath and rocketmqHome never may).

UPDATE_CONTROLLER_CONFIG changes, on the member it is sent to, the keys that act at once
(RUNTIME_KEYS); the others take a restart, and it refuses them.

rmq's own: controllerDLegerElectionTimeoutMs (3000) and controllerDLegerHeartbeatIntervalMs
(1000), the Raft timings (RocketMQ's controller takes DLedger's defaults).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rmq import rocketmq_keys
from rmq.dledger.peers import parse_peers
from rmq.rocketmq_keys import ConfigError, parse_bool, show_bool

log = logging.getLogger("rmq.controller.config")


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    group: str = "DefaultControllerGroup"
    peers: dict[str, str] = field(default_factory=dict)  # id -> "host:port"
    self_id: str = ""
    store_path: str = "~/DledgerController"
    mapped_file_size: int = 1024 * 1024 * 1024
    enable_elect_unclean_master: bool = False
    notify_broker_role_changed: bool = True
    scan_not_active_broker_interval_ms: int = 5000
    scan_inactive_master_interval_ms: int = 5000
    elect_master_max_retry_count: int = 3
    bind_address: str = "0.0.0.0"
    election_timeout_ms: int = 3000
    heartbeat_interval_ms: int = 1000
    config_black_list: str = "configBlackList;configStorePath"

    def validate(self) -> None:
        """Raises ConfigError for a setting a member cannot start with."""
        if not self.peers:
            raise ConfigError("controllerDLegerPeers", "needs the group's members, n0-host:port;n1-host:port;...")
        if self.self_id not in self.peers:
            raise ConfigError(
                "controllerDLegerSelfId",
                f"{self.self_id!r} is not one of controllerDLegerPeers ({', '.join(self.peers)})",
            )
        for key, value in (
            ("scanNotActiveBrokerInterval", self.scan_not_active_broker_interval_ms),
            ("scanInactiveMasterInterval", self.scan_inactive_master_interval_ms),
            ("electMasterMaxRetryCount", self.elect_master_max_retry_count),
            ("mappedFileSize", self.mapped_file_size),
        ):
            if value <= 0:
                raise ConfigError(key, f"must be positive, got {value}")
        if not 100 <= self.election_timeout_ms <= 600_000:
            raise ConfigError("controllerDLegerElectionTimeoutMs", "must be 100..600000 ms")
        if not 10 <= self.heartbeat_interval_ms < self.election_timeout_ms:
            raise ConfigError(
                "controllerDLegerHeartbeatIntervalMs", "must be at least 10 ms and below the election timeout"
            )

    @property
    def address(self) -> str:
        """This member's "host:port" (its peers entry)."""
        return self.peers[self.self_id]

    @property
    def store_dir(self) -> str:
        return os.path.expanduser(self.store_path)

    def with_properties(
        self, props: Mapping[str, str], *, runtime_only: bool = False
    ) -> tuple[ControllerConfig, list[str]]:
        """A copy with RocketMQ-named properties applied, and the keys it did not know.

        Raises ConfigError naming the key for a bad value, and with `runtime_only` for a key
        that only takes effect at startup.
        """
        changes: dict[str, Any] = {}
        unknown = []
        for key, text in props.items():
            entry = _KEYS.get(key)
            if entry is None:
                unknown.append(key)
                continue
            if runtime_only and key not in RUNTIME_KEYS:
                raise ConfigError(key, "can only be set at startup")
            name, parse, _ = entry
            try:
                changes[name] = parse(text.strip())
            except ValueError as exc:
                raise ConfigError(key, f"bad value {text!r} ({exc})") from None
        return dataclasses.replace(self, **changes), unknown

    def black_list(self) -> frozenset[str]:
        """The keys UPDATE_CONTROLLER_CONFIG refuses (ControllerRequestProcessor's configBlackList)."""
        listed = {k.strip() for k in self.config_black_list.split(";") if k.strip()}
        return frozenset({"configBlackList", "configStorePath", "rocketmqHome"} | listed)

    def to_properties(self) -> dict[str, str]:
        """The settings under their key names, sorted (-p, GET_CONTROLLER_CONFIG)."""
        return {key: show(getattr(self, name)) for key, (name, _, show) in sorted(_KEYS.items())}


def report_unused(keys: Iterable[str], source: str) -> None:
    rocketmq_keys.report_unused(
        keys, honoured=_KEYS, accepted=rocketmq_keys.CONTROLLER | rocketmq_keys.NAMESRV, source=source, logger=log
    )


def _show_peers(peers: dict[str, str]) -> str:
    return ";".join(f"{k}-{v}" for k, v in peers.items())


_KEYS: dict[str, tuple[str, Callable[[str], Any], Callable[[Any], str]]] = {
    "controllerDLegerGroup": ("group", str, str),
    "controllerDLegerPeers": ("peers", parse_peers, _show_peers),
    "controllerDLegerSelfId": ("self_id", str, str),
    "controllerStorePath": ("store_path", lambda t: t or "~/DledgerController", str),
    "mappedFileSize": ("mapped_file_size", int, str),
    "enableElectUncleanMaster": ("enable_elect_unclean_master", parse_bool, show_bool),
    "notifyBrokerRoleChanged": ("notify_broker_role_changed", parse_bool, show_bool),
    "scanNotActiveBrokerInterval": ("scan_not_active_broker_interval_ms", int, str),
    "scanInactiveMasterInterval": ("scan_inactive_master_interval_ms", int, str),
    "electMasterMaxRetryCount": ("elect_master_max_retry_count", int, str),
    "bindAddress": ("bind_address", str, str),
    "controllerDLegerElectionTimeoutMs": ("election_timeout_ms", int, str),
    "controllerDLegerHeartbeatIntervalMs": ("heartbeat_interval_ms", int, str),
    "configBlackList": ("config_black_list", str, str),
}
KEYS = frozenset(_KEYS)
# What a running member acts on at once: the server reads these settings afresh each time
RUNTIME_KEYS = frozenset(
    {
        "enableElectUncleanMaster",
        "notifyBrokerRoleChanged",
        "scanNotActiveBrokerInterval",
        "scanInactiveMasterInterval",
        "electMasterMaxRetryCount",
    }
)

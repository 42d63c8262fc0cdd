"""ProxyConfig: the keys of RocketMQ's rmq-proxy.json (ProxyConfig.java) that rmq reads.

A key of the file that rmq does not know is kept in `unknown` and logged once, so a Java
proxy's file loads unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rmq.remoting import TlsMode
from rmq.remoting.tlsconfig import TlsConfigError, server_ssl_context

CLUSTER, LOCAL = "CLUSTER", "LOCAL"


# keys ProxyConfig.java spells other than its fields' camel case
_KEYS = {"enable_acl": "enableACL"}


def _camel(name: str) -> str:
    if name in _KEYS:
        return _KEYS[name]
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


@dataclass
class ProxyConfig:
    proxy_mode: str = CLUSTER  # CLUSTER: in front of brokers found through namesrvAddr; LOCAL: inside a broker
    namesrv_addr: str = ""  # "host:port;host:port"; default $NAMESRV_ADDR
    grpc_server_port: int = 8081
    proxy_cluster_name: str = "DefaultCluster"
    proxy_name: str = "DEFAULT_PROXY"
    # the address QueryRoute and the settings name as the proxy's; "" is the address the client dialed
    local_serve_addr: str = ""
    max_message_size: int = 4 * 1024 * 1024
    enable_topic_message_type_check: bool = True
    default_invisible_time_mills: int = 60_000
    min_invisible_time_mills_for_recv: int = 10_000
    max_invisible_time_mills: int = 12 * 3600_000
    max_delay_time_mills: int = 24 * 3600_000  # a delivery timestamp further out is ILLEGAL_DELIVERY_TIME
    grpc_client_producer_max_attempts: int = 3
    grpc_client_producer_backoff_initial_millis: int = 10
    grpc_client_producer_backoff_max_millis: int = 1000
    grpc_client_producer_backoff_multiplier: int = 2
    grpc_client_consumer_min_long_polling_timeout_millis: int = 5000
    grpc_client_consumer_max_long_polling_timeout_millis: int = 20_000
    grpc_client_consumer_long_polling_batch_size: int = 32
    # ms of a receive's deadline kept back from the broker's long poll for the answer's way back
    grpc_client_consumer_long_polling_reserve_time_millis: int = 1000  # rmq's own
    # how long the proxy remembers where a half message went, for its EndTransaction
    transaction_data_expire_millis: int = 30_000
    # bytes of one gRPC request message; a larger one is refused with RESOURCE_EXHAUSTED
    grpc_max_inbound_message_size: int = 130 * 1024 * 1024
    # a gRPC connection with no call in progress for this long is closed (GOAWAY)
    grpc_client_idle_time_mills: int = 120_000
    # seconds a client has to answer a command relayed from a broker (thread stack, message verification)
    grpc_proxy_relay_request_timeout_in_seconds: int = 5
    # seconds a consumer group's config read from a broker is used before it is read again
    subscription_group_config_cache_refresh_seconds: int = 20
    # TLS on the gRPC port: served when both paths are given (PEM). Java's test mode makes up a
    # self-signed certificate; rmq makes none up, so tlsTestModeEnable is read and has no effect
    tls_test_mode_enable: bool = True
    tls_key_path: str = ""
    tls_cert_path: str = ""
    # rmq's own: Java's proxy takes it from tls.server.mode (TlsSystemConfig), default permissive
    tls_server_mode: str = "permissive"  # permissive (TLS and plain on the port) | enforcing | disabled
    # ACL 1.0 on the gRPC port (Java 5.2's enableACL): every call signed by an account of plain_acl.yml
    enable_acl: bool = False
    # sign the proxy's own calls to the brokers with the account of <rocketmqHome>/conf/tools.yml
    # (Java's name; rmq applies it in local mode too, whose calls go over remoting)
    enable_acl_rpc_hook_for_cluster_mode: bool = False
    rocketmq_home: str = ""  # where conf/plain_acl.yml and conf/tools.yml are; default $ROCKETMQ_HOME
    # PROM: Prometheus metrics of the proxy on metricsPromExporterHost:metricsPromExporterPort
    # (rmq.metrics.proxy); DISABLE (Java's OTLP_GRPC and LOG are not served)
    metrics_exporter_type: str = "DISABLE"
    metrics_prom_exporter_host: str = ""  # "" = every address, as Java's proxy
    metrics_prom_exporter_port: int = 5557
    acl_plain_file: str = ""  # rmq's own, as the broker's: "" = <rocketmqHome>/conf/plain_acl.yml
    unknown: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> ProxyConfig:
        """Keys as rmq-proxy.json names them (camelCase); ValueError for a bad value."""
        fields = {_camel(f.name): f for f in dataclasses.fields(cls) if f.name != "unknown"}
        config = cls()
        for key, value in values.items():
            f = fields.get(key)
            if f is None:
                config.unknown[key] = value
                continue
            default = getattr(config, f.name)
            try:
                if isinstance(default, bool):
                    value = value if isinstance(value, bool) else str(value).lower() == "true"
                elif isinstance(default, int):
                    value = int(value)
                else:
                    value = str(value)
            except (TypeError, ValueError):
                raise ValueError(f"{key}: not a number: {value!r}") from None
            setattr(config, f.name, value)
        config.proxy_mode = config.proxy_mode.upper()
        if config.proxy_mode not in (CLUSTER, LOCAL):
            raise ValueError(f"proxyMode: {config.proxy_mode!r} is neither CLUSTER nor LOCAL")
        # as Java's setMetricsExporterType: a name or MetricsExporterType's number
        kind = config.metrics_exporter_type.upper()
        config.metrics_exporter_type = {"0": "DISABLE", "2": "PROM"}.get(kind, kind)
        if config.metrics_exporter_type not in ("DISABLE", "PROM"):
            raise ValueError(f"metricsExporterType: {kind!r} is not served by rmq: DISABLE or PROM")
        config.tls_server_mode = config.tls_server_mode.lower()
        if config.tls_server_mode not in ("disabled", "permissive", "enforcing"):
            raise ValueError(f"tlsServerMode: {config.tls_server_mode!r} is not disabled, permissive or enforcing")
        if bool(config.tls_key_path) != bool(config.tls_cert_path):
            raise ValueError("tlsKeyPath and tlsCertPath go together: give both or neither")
        if not config.namesrv_addr:
            config.namesrv_addr = os.environ.get("NAMESRV_ADDR", "")
        if not config.rocketmq_home:
            config.rocketmq_home = os.environ.get("ROCKETMQ_HOME", "")
        return config

    @classmethod
    def load(cls, path: str | Path) -> ProxyConfig:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
        if not isinstance(values, dict):
            raise ValueError(f"{path}: not a JSON object")
        return cls.from_mapping(values)

    def tls(self) -> tuple[TlsMode, ssl.SSLContext] | None:
        """The gRPC port's TLS mode and server context; None when it serves plain only.
        ValueError when the certificate or key cannot be loaded."""
        mode = TlsMode(self.tls_server_mode)
        if mode is TlsMode.DISABLED or not (self.tls_cert_path and self.tls_key_path):
            return None
        try:
            return mode, server_ssl_context(self.tls_cert_path, self.tls_key_path)
        except (OSError, ssl.SSLError, TlsConfigError) as exc:
            raise ValueError(f"tlsCertPath/tlsKeyPath: {exc}") from None

    def acl_file(self) -> Path:
        """The plain_acl.yml enableACL reads: aclPlainFile (relative: under rocketmqHome),
        else <rocketmqHome>/conf/plain_acl.yml. ValueError when neither says where."""
        home = Path(self.rocketmq_home).expanduser() if self.rocketmq_home else None
        if self.acl_plain_file:
            path = Path(self.acl_plain_file).expanduser()
            return home / path if home is not None and not path.is_absolute() else path
        if home is None:
            raise ValueError("enableACL: set rocketmqHome (or $ROCKETMQ_HOME) or aclPlainFile for plain_acl.yml")
        return home / "conf" / "plain_acl.yml"

    def broker_credentials(self) -> tuple[str, str] | None:
        """The (accessKey, secretKey) the proxy signs its calls to the brokers with: those of
        <rocketmqHome>/conf/tools.yml with enableAclRpcHookForClusterMode, as Java's proxy
        (AclUtils.getAclRPCHook), else None. ValueError when the file cannot give them."""
        if not self.enable_acl_rpc_hook_for_cluster_mode:
            return None
        if not self.rocketmq_home:
            raise ValueError("enableAclRpcHookForClusterMode: set rocketmqHome (or $ROCKETMQ_HOME) for conf/tools.yml")
        path = Path(self.rocketmq_home).expanduser() / "conf" / "tools.yml"
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ValueError(f"enableAclRpcHookForClusterMode: cannot read {path}: {exc}") from None
        keys = (data.get("accessKey"), data.get("secretKey")) if isinstance(data, dict) else (None, None)
        if not all(isinstance(k, str | int) and str(k) for k in keys):
            raise ValueError(f"enableAclRpcHookForClusterMode: {path} gives no accessKey and secretKey")
        return str(keys[0]), str(keys[1])

    def namesrv(self) -> tuple[str, ...]:
        return tuple(a.strip() for a in self.namesrv_addr.split(";") if a.strip())

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

from rmq.remoting import TlsMode
from rmq.remoting.tlsconfig import TlsConfigError, server_ssl_context

CLUSTER, LOCAL = "CLUSTER", "LOCAL"


def _camel(name: str) -> str:
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
    # seconds a consumer group's config read from a broker is used before it is read again
    subscription_group_config_cache_refresh_seconds: int = 20
    # TLS on the gRPC port: served when both paths are given (PEM). Java's test mode makes up a
    # self-signed certificate; rmq makes none up, so tlsTestModeEnable is read and has no effect
    tls_test_mode_enable: bool = True
    tls_key_path: str = ""
    tls_cert_path: str = ""
    # rmq's own: Java's proxy takes it from tls.server.mode (TlsSystemConfig), default permissive
    tls_server_mode: str = "permissive"  # permissive (TLS and plain on the port) | enforcing | disabled
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
        config.tls_server_mode = config.tls_server_mode.lower()
        if config.tls_server_mode not in ("disabled", "permissive", "enforcing"):
            raise ValueError(f"tlsServerMode: {config.tls_server_mode!r} is not disabled, permissive or enforcing")
        if bool(config.tls_key_path) != bool(config.tls_cert_path):
            raise ValueError("tlsKeyPath and tlsCertPath go together: give both or neither")
        if not config.namesrv_addr:
            config.namesrv_addr = os.environ.get("NAMESRV_ADDR", "")
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

    def namesrv(self) -> tuple[str, ...]:
        return tuple(a.strip() for a in self.namesrv_addr.split(";") if a.strip())

"""ProxyConfig: the keys of RocketMQ's rmq-proxy.json (ProxyConfig.java) that rmq reads.

A key of the file that rmq does not know is kept in `unknown` and logged once, so a Java
proxy's file loads unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

    def namesrv(self) -> tuple[str, ...]:
        return tuple(a.strip() for a in self.namesrv_addr.split(";") if a.strip())

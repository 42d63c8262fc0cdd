"""Requests and configs shared by the name server tests."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

from rmq.namesrv import NamesrvConfig
from rmq.protocol import RemotingCommand, RequestCode
from rmq.protocol.bodies import DataVersion, TopicConfig
from rmq.protocol.bodies.register import RegisterBrokerBody as RegisterBody
from rmq.protocol.bodies.register import encode_register_body

if TYPE_CHECKING:
    from pathlib import Path


def loopback_config(tmp_path: Path, **overrides: Any) -> NamesrvConfig:
    settings: dict[str, Any] = {
        "listen_host": "127.0.0.1",
        "listen_port": 0,
        "kv_config_path": str(tmp_path / "kvConfig.json"),
        **overrides,
    }
    return NamesrvConfig(**settings)


BROKER_ADDR = "127.0.0.1:30911"
BODY = RegisterBody(
    DataVersion(timestamp=1700000000000, counter=1), {"TopicTest": TopicConfig("TopicTest", 4, 4, 6)}, []
)


def register_request(
    body: bytes | None = None,
    *,
    broker_name: str = "broker-a",
    broker_addr: str = BROKER_ADDR,
    broker_id: int = 0,
    cluster: str = "DefaultCluster",
    **extra: Any,
) -> RemotingCommand:
    data = encode_register_body(BODY) if body is None else body
    ext = {
        "brokerName": broker_name,
        "brokerAddr": broker_addr,
        "clusterName": cluster,
        "haServerAddr": broker_addr.rsplit(":", 1)[0] + ":30912",
        "brokerId": str(broker_id),
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(data) & 0x7FFFFFFF),
        **extra,
    }
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, data)


def route_request(topic: str, version: int = 409, **extra: str) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, **extra})
    request.version = version
    return request

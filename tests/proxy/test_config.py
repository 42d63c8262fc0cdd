"""ProxyConfig reads rmq-proxy.json's keys as RocketMQ names them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmq.proxy import ProxyConfig


def test_keys_of_rmq_proxy_json(tmp_path: Path) -> None:
    path = tmp_path / "rmq-proxy.json"
    values = {
        "rocketMQClusterName": "DefaultCluster",
        "namesrvAddr": "127.0.0.1:9876;127.0.0.2:9876",
        "grpcServerPort": "18081",
        "proxyMode": "cluster",
        "minInvisibleTimeMillsForRecv": 1000,
        "enableTopicMessageTypeCheck": "false",
    }
    path.write_text(json.dumps(values))
    config = ProxyConfig.load(path)
    assert config.grpc_server_port == 18081 and config.proxy_mode == "CLUSTER"
    assert config.namesrv() == ("127.0.0.1:9876", "127.0.0.2:9876")
    assert config.min_invisible_time_mills_for_recv == 1000
    assert config.enable_topic_message_type_check is False
    assert config.unknown == {"rocketMQClusterName": "DefaultCluster"}


def test_bad_values() -> None:
    with pytest.raises(ValueError, match="grpcServerPort"):
        ProxyConfig.from_mapping({"grpcServerPort": "eighty"})
    with pytest.raises(ValueError, match="proxyMode"):
        ProxyConfig.from_mapping({"proxyMode": "REMOTE"})

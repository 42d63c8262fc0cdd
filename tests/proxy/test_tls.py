"""TLS on the proxy's gRPC port (issue 44): tlsCertPath and tlsKeyPath as RocketMQ's
ProxyConfig names them; the official client with its TLS channel, trusting the test CA,
sends and receives; in permissive mode a plain client is served on the same port, in
enforcing mode it is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmq.proxy import ProxyConfig, ProxyServer
from tests.client.conftest import Cluster
from tests.tls_certs import Certs

from .conftest import FAST, run_client

TOPIC = "ProxyTlsTopic"
GROUP = "ProxyTlsGroup"


def tls_config(cluster: Cluster, certs: Certs, mode: str) -> ProxyConfig:
    return ProxyConfig.from_mapping(
        {
            "namesrvAddr": cluster.namesrv_addr,
            "grpcServerPort": 0,
            "tlsTestModeEnable": False,
            "tlsCertPath": certs.server_cert,
            "tlsKeyPath": certs.server_key,
            "tlsServerMode": mode,
            **FAST,
        }
    )


async def test_tls_client_sends_and_receives(cluster: Cluster, tmp_path: Path) -> None:
    certs = Certs.write(tmp_path / "certs")
    await cluster.create_topic(TOPIC)
    tls = {"CLIENT5_TLS": "1", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": certs.ca_path}
    async with ProxyServer(tls_config(cluster, certs, "permissive"), host="127.0.0.1") as proxy:
        endpoint = f"127.0.0.1:{proxy.port}"
        sent = await run_client(endpoint, "send", TOPIC, GROUP, "2", env=tls)
        got = await run_client(endpoint, "receive", TOPIC, GROUP, "2", env=tls)
        assert sorted(m["id"] for m in got[:-1]) == sorted(s["sent"] for s in sent)
        # permissive: a plain client on the same port too
        [route] = await run_client(endpoint, "query_route", TOPIC, GROUP)
        assert route["code"] == 20000


async def test_enforcing_refuses_plain_clients(cluster: Cluster, tmp_path: Path) -> None:
    certs = Certs.write(tmp_path / "certs")
    await cluster.create_topic(TOPIC)
    async with ProxyServer(tls_config(cluster, certs, "enforcing"), host="127.0.0.1") as proxy:
        endpoint = f"127.0.0.1:{proxy.port}"
        [sent] = await run_client(
            endpoint,
            "send",
            TOPIC,
            GROUP,
            "1",
            env={"CLIENT5_TLS": "1", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": certs.ca_path},
        )
        assert sent["sent"]
        with pytest.raises(AssertionError, match="UNAVAILABLE") as refused:
            await run_client(endpoint, "query_route", TOPIC, GROUP)
        assert "exited" in str(refused.value)


def test_tls_paths_go_together() -> None:
    with pytest.raises(ValueError, match="tlsKeyPath and tlsCertPath"):
        ProxyConfig.from_mapping({"tlsCertPath": "server.pem"})
    with pytest.raises(ValueError, match="tlsServerMode"):
        ProxyConfig.from_mapping({"tlsServerMode": "sometimes"})
    assert ProxyConfig.from_mapping({"tlsTestModeEnable": "false"}).tls() is None

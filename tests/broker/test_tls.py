"""TLS on the broker (tls.server.* on its main and VIP ports, tls.enable for its registration),
and our clients connecting with `tls=`: enforcing, permissive and mutual TLS."""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from rmq.broker.config import BrokerConfig, ConfigError
from rmq.broker.controller import BrokerController
from rmq.client import ConsumeFromWhere, Message, MQAdmin, MQClientError, Producer, PullConsumer, TlsClientSettings
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.server import NamesrvServer
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.remoting import ClientConfig, RemotingClient, RemotingConnectError

from ..tls_certs import Certs
from .cluster import broker_config


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return Certs.write(tmp_path / "certs")


def namesrv_config(certs: Certs, mode: str) -> NamesrvConfig:
    return NamesrvConfig(
        listen_host="127.0.0.1",
        listen_port=0,
        kv_config_path=None,
        tls_mode=mode,
        tls_cert_path=certs.server_cert,
        tls_key_path=certs.server_key,
    )


@asynccontextmanager
async def tls_cluster(
    tmp_path: Path, certs: Certs, mode: str, **props: str
) -> AsyncIterator[tuple[NamesrvServer, BrokerController]]:
    """A name server and a broker, both in `mode`; the broker registers over TLS."""
    async with NamesrvServer(namesrv_config(certs, mode)) as ns:
        config = broker_config(
            tmp_path / "store",
            ns.address,
            **certs.server_props(mode),
            **{"tls.enable": "true", "tls.client.trustCertPath": certs.ca_path},
            **props,
        )
        async with BrokerController(config) as broker:
            with trio.fail_after(10):
                while not ns.routes.live:
                    await trio.sleep(0.02)
            yield ns, broker


async def runtime_info(address: str, config: ClientConfig) -> RemotingCommand:
    async with RemotingClient(config) as client:
        return await client.invoke(address, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 3)


async def test_enforcing_broker_serves_tls_and_refuses_plain_text(
    tmp_path: Path, certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rmq.remoting")
    tls = ClientConfig(tls=True, ssl_context=certs.client_context())
    async with tls_cluster(tmp_path, certs, "enforcing") as (ns, broker):
        vip = f"127.0.0.1:{broker.vip_port}"
        for address in (broker.address, vip):
            assert (await runtime_info(address, tls)).code == ResponseCode.SUCCESS
            with pytest.raises(RemotingConnectError):
                await runtime_info(address, ClientConfig())
        # the whole client over TLS: routes from the name server, sends and pulls from the broker
        async with Producer("TlsPG", ns.address, tls=certs.client_settings()) as producer:
            for i in range(5):
                await producer.send(Message("TlsTopic", f"secret {i}".encode()))
        consumer = PullConsumer(
            "TlsCG", ns.address, tls=certs.client_context(), consume_from_where=ConsumeFromWhere.FIRST_OFFSET
        )
        consumer.subscribe("TlsTopic")
        async with consumer:
            bodies: list[bytes] = []
            with trio.fail_after(20):
                while len(bodies) < 5:
                    bodies += [m.body for m in await consumer.poll(timeout=1)]
        assert sorted(bodies) == [f"secret {i}".encode() for i in range(5)]
        async with MQAdmin(ns.address, tls=certs.client_settings()) as admin:
            assert (await admin.cluster_info()).broker_names("TestCluster") == ["broker-a"]
        # a plain client does not get through the name server
        with pytest.raises(MQClientError):
            async with Producer("PlainPG", ns.address, send_timeout=1, retry_times=0) as plain:
                await plain.send(Message("TlsTopic", b"in the clear"))
    refused = [r.getMessage() for r in caplog.records if "refused connection" in r.getMessage()]
    assert refused and all("enforces TLS" in line for line in refused)


async def test_permissive_broker_serves_plain_and_tls_clients(
    tmp_path: Path, certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rmq.remoting")
    async with tls_cluster(tmp_path, certs, "permissive") as (ns, broker):
        async with (
            Producer("PlainPG", ns.address) as plain,
            Producer("TlsPG", ns.address, tls=certs.client_context()) as secure,
        ):
            assert (await plain.send(Message("Mixed", b"plain"))).status.value == "SEND_OK"
            assert (await secure.send(Message("Mixed", b"tls"))).status.value == "SEND_OK"
    opened = [r.getMessage() for r in caplog.records if "opened" in r.getMessage()]
    assert any(line.endswith("with TLS") for line in opened)
    assert any(not line.endswith("with TLS") for line in opened)


async def test_mutual_tls_broker_refuses_a_client_without_a_trusted_certificate(tmp_path: Path, certs: Certs) -> None:
    async with tls_cluster(
        tmp_path,
        certs,
        "enforcing",
        **{
            "tls.server.need.client.auth": "require",
            "tls.server.trustCertPath": certs.client_ca_path,
            # the broker's own connections present the client certificate too
            "tls.client.certPath": certs.client_cert,
            "tls.client.keyPath": certs.client_key,
        },
    ) as (_, broker):
        with_cert = certs.client_settings(cert_path=certs.client_cert, key_path=certs.client_key)
        assert (
            await runtime_info(broker.address, ClientConfig(tls=True, ssl_context=with_cert.ssl_context()))
        ).code == 0
        for settings in (
            certs.client_settings(),
            certs.client_settings(cert_path=certs.stranger_cert, key_path=certs.stranger_key),
        ):
            with trio.fail_after(10), pytest.raises(RemotingConnectError):
                await runtime_info(broker.address, ClientConfig(tls=True, ssl_context=settings.ssl_context()))


def test_tls_keys_from_broker_conf_and_tls_properties(tmp_path: Path, certs: Certs) -> None:
    tls_properties = tmp_path / "tls.properties"
    tls_properties.write_text(
        "tls.test.mode.enable=false\n"
        "tls.server.need.client.auth=require\n"
        f"tls.server.certPath={certs.server_cert}\n"
        f"tls.server.keyPath={certs.server_key}\n"
        "tls.server.keyPassword=not-shown\n"
        f"tls.server.trustCertPath={certs.client_ca_path}\n"
        f"tls.client.trustCertPath={certs.ca_path}\n"
        "tls.server.mode=disabled\n"
    )
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"brokerName=broker-a\ntls.server.mode=enforcing\ntls.enable=true\ntls.config.file={tls_properties}\n"
    )
    config = BrokerConfig.load(conf, environ={})
    assert config.tls_server_mode == "enforcing"  # broker.conf wins over the file
    assert config.tls_server_need_client_auth == "require"
    assert (config.tls_server_cert_path, config.tls_server_trust_cert_path) == (certs.server_cert, certs.client_ca_path)
    assert config.tls_enable and config.tls_client_trust_cert_path == certs.ca_path
    shown = config.to_properties()
    assert shown["tls.server.keyPassword"] == "******" and shown["tls.client.keyPassword"] == ""

    with pytest.raises(ConfigError, match="tls.config.file"):
        BrokerConfig.from_properties({"tls.config.file": str(tmp_path / "missing")}, environ={})
    with pytest.raises(ConfigError, match="tls.server.certPath"):
        BrokerConfig.from_properties({"tls.server.mode": "enforcing"}, environ={})
    with pytest.raises(ConfigError, match="tls.server.need.client.auth"):
        BrokerConfig.from_properties({"tls.server.need.client.auth": "always"}, environ={})
    unusable = BrokerConfig.from_properties(
        {"tls.server.mode": "permissive", "tls.server.certPath": certs.ca_path, "tls.server.keyPath": certs.ca_path},
        environ={},
    )
    with pytest.raises(ConfigError, match="cannot load"):
        BrokerController(unusable)


def test_clients_check_their_tls_option_at_construction(tmp_path: Path, certs: Certs) -> None:
    with pytest.raises(MQClientError, match="option tls"):
        Producer("PG", "127.0.0.1:9876", tls="yes")
    with pytest.raises(MQClientError, match="tls.client.certPath"):
        PullConsumer("CG", "127.0.0.1:9876", tls=TlsClientSettings(cert_path=str(tmp_path / "missing.pem")))
    with pytest.raises(MQClientError, match="tls.client.trustCertPath"):
        MQAdmin("127.0.0.1:9876", tls=TlsClientSettings(trust_cert_path=str(tmp_path / "missing.pem")))
    producer = Producer("PG", "127.0.0.1:9876", tls=True)
    assert producer.instance.ssl_context is not None
    assert producer.instance.ssl_context.verify_mode is ssl.CERT_REQUIRED
    assert Producer("PG", "127.0.0.1:9876").instance.ssl_context is None

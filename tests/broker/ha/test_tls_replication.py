"""Master/slave replication over a TLS HA port: the master's tls.server.mode covers its HA port,
a slave with tls.enable connects to it with TLS (and one without is refused by an enforcing master)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio

from rmq.broker.controller import BrokerController
from rmq.broker.ha.master import HAService
from rmq.client import Message, Producer
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.server import NamesrvServer

from ...tls_certs import Certs
from ..cluster import broker_config


async def start(nursery: trio.Nursery, store: Path, namesrv: str, **props: str) -> BrokerController:
    broker = BrokerController(broker_config(store, namesrv, **props))
    await nursery.start(broker.serve)
    return broker


async def test_sync_master_and_slave_replicate_over_tls(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="rmq.broker.ha")
    certs = Certs.write(tmp_path / "certs")
    tls = {
        **certs.server_props("enforcing"),
        "tls.enable": "true",
        "tls.client.trustCertPath": certs.ca_path,
    }
    ns_config = NamesrvConfig(
        listen_host="127.0.0.1",
        listen_port=0,
        kv_config_path=None,
        tls_mode="enforcing",
        tls_cert_path=certs.server_cert,
        tls_key_path=certs.server_key,
    )
    async with NamesrvServer(ns_config) as ns, trio.open_nursery() as nursery:
        master = await start(nursery, tmp_path / "m", ns.address, brokerRole="SYNC_MASTER", **tls)
        slave = await start(nursery, tmp_path / "s", ns.address, brokerRole="SLAVE", brokerId="1", **tls)
        assert isinstance(master.ha, HAService) and slave.slave_sync is not None
        with trio.fail_after(15):
            while not master.ha.connections or min(c.ack_offset for c in master.ha.connections) < 0:
                await trio.sleep(0.01)
        async with Producer("PG", ns.address, retry_times=0, tls=certs.client_settings()) as producer:
            for i in range(30):
                result = await producer.send(Message("TlsHa", f"m{i}".encode() * 50))
                assert result.status.value == "SEND_OK"  # the slave acked it over the TLS HA port
        assert slave.message_store.max_phy_offset == master.message_store.max_phy_offset > 0
        assert master.ha.runtime_info()["inSyncSlaveNums"] == 1
        rounds = slave.slave_sync.rounds
        slave.slave_sync.trigger()
        with trio.fail_after(15):  # the slave copies the master's metadata over TLS too
            while slave.slave_sync.rounds == rounds:
                await trio.sleep(0.05)
        assert slave.topics.get("TlsHa") is not None

        # a slave without tls.enable is refused by the enforcing HA port
        plain = {k: v for k, v in tls.items() if not k.startswith("tls.client") and k != "tls.enable"}
        stray = await start(
            nursery,
            tmp_path / "s2",
            ns.address,
            brokerRole="SLAVE",
            brokerId="2",
            haMasterAddress=master.ha_address,
            **plain,
        )
        with trio.fail_after(10):
            while not any("enforces TLS" in r.getMessage() for r in caplog.records):
                await trio.sleep(0.02)
        assert stray.message_store.max_phy_offset == 0
        for broker in (stray, slave, master):
            broker.shutdown()
    messages = [r.getMessage() for r in caplog.records]
    assert any("connected with TLS" in m for m in messages)
    assert any(m.startswith("HA connected to master") and "with TLS" in m for m in messages)

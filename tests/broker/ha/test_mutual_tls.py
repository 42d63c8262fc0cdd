"""Mutual TLS on the HA port: the only authentication a slave meets. A master with
tls.server.need.client.auth=require replicates to a slave presenting a client certificate
it trusts, and refuses one with no certificate or one from another CA (which would
otherwise read the whole CommitLog)."""

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

LIMIT = 15.0  # seconds any wait here may take


async def start(nursery: trio.Nursery, store: Path, namesrv: str, **props: str) -> BrokerController:
    broker = BrokerController(broker_config(store, namesrv, **props))
    await nursery.start(broker.serve)
    return broker


async def test_the_ha_port_replicates_only_to_slaves_with_a_trusted_certificate(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rmq.broker.ha")
    certs = Certs.write(tmp_path / "certs")
    master_tls = certs.server_props(
        "enforcing",
        **{"tls.server.need.client.auth": "require", "tls.server.trustCertPath": certs.client_ca_path},
    )
    client_keys = {"tls.enable": "true", "tls.client.trustCertPath": certs.ca_path}
    trusted = {**client_keys, "tls.client.certPath": certs.client_cert, "tls.client.keyPath": certs.client_key}
    stranger = {**client_keys, "tls.client.certPath": certs.stranger_cert, "tls.client.keyPath": certs.stranger_key}
    ns_config = NamesrvConfig(
        listen_host="127.0.0.1",
        listen_port=0,
        kv_config_path=None,
        tls_mode="permissive",
        tls_cert_path=certs.server_cert,
        tls_key_path=certs.server_key,
    )
    async with NamesrvServer(ns_config) as ns, trio.open_nursery() as nursery:
        master = await start(nursery, tmp_path / "m", ns.address, brokerRole="ASYNC_MASTER", **master_tls, **trusted)
        assert isinstance(master.ha, HAService)
        async with Producer("PG", ns.address, retry_times=0, tls=certs.client_settings(
            cert_path=certs.client_cert, key_path=certs.client_key
        )) as producer:  # fmt: skip
            for i in range(20):
                assert (await producer.send(Message("MtlsHa", f"m{i}".encode() * 100))).status.value == "SEND_OK"
        end = master.message_store.max_phy_offset
        assert end > 0

        # no client certificate, then one from a CA the master does not trust: refused
        for n, keys in ((2, client_keys), (3, stranger)):
            refused_before = sum("HA slave" in r.getMessage() and "refused" in r.getMessage() for r in caplog.records)
            intruder = await start(
                nursery,
                tmp_path / f"s{n}",
                ns.address,
                brokerRole="SLAVE",
                brokerId=str(n),
                haMasterAddress=master.ha_address,
                **master_tls,
                **keys,
            )
            with trio.fail_after(LIMIT):
                while (
                    sum("HA slave" in r.getMessage() and "refused" in r.getMessage() for r in caplog.records)
                    == refused_before
                ):
                    await trio.sleep(0.02)
            assert intruder.message_store.max_phy_offset == 0
            assert not master.ha.connections
            intruder.shutdown()
            await intruder.wait_stopped()

        # a slave with a certificate the master trusts replicates the whole log
        slave = await start(
            nursery,
            tmp_path / "s1",
            ns.address,
            brokerRole="SLAVE",
            brokerId="1",
            haMasterAddress=master.ha_address,
            **master_tls,
            **trusted,
        )
        with trio.fail_after(LIMIT):
            while slave.message_store.max_phy_offset < end:
                await trio.sleep(0.02)
        assert slave.message_store.max_phy_offset == end
        for broker in (slave, master):
            broker.shutdown()
    messages = [r.getMessage() for r in caplog.records]
    refusals = [m for m in messages if m.startswith("HA slave") and "refused" in m]
    assert all("TLS handshake failed" in m for m in refusals)
    assert any("peer did not return a certificate" in m for m in refusals)  # the slave without one
    assert any("certificate verify failed" in m for m in refusals)  # the slave with the stranger's
    assert sum(m.startswith("HA slave") and m.endswith("connected with TLS") for m in messages) == 1

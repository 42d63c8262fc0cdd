"""A controller-mode broker's metrics: master epoch, SyncStateSet size, role changes."""

from __future__ import annotations

from pathlib import Path

import trio

from rmq.broker.controller import BrokerController
from rmq.controller.server import ControllerServer
from rmq.tools.dev import controller_broker_configs, controller_configs
from tests.broker.cluster import loopback_namesrv
from tests.ports import free_ports

from .scrape import scrape, value

PROM = {"metricsExporterType": "PROM", "metricsPromExporterPort": "0"}


async def test_the_master_reports_its_epoch_and_sync_state_set(tmp_path: Path) -> None:
    base = free_ports(21, below=2, extra=range(30010, 30013))
    async with loopback_namesrv() as ns, trio.open_nursery() as nursery:
        members = controller_configs(tmp_path, base_port=base)
        for member in members:
            await nursery.start(ControllerServer(member).serve)
        brokers = []
        for config in controller_broker_configs(ns.address, members, tmp_path, base_port=base, more=lambda _k: PROM):
            brokers.append(await nursery.start(BrokerController(config).serve))
        with trio.fail_after(40):
            while True:
                masters = [b for b in brokers if not b.config.is_slave]
                if masters and len(masters[0].replicas.insync.members) == 3:
                    break
                await trio.sleep(0.2)
        samples = await scrape(masters[0].metrics.port)
        assert value(samples, "rocketmq_broker_master_epoch") >= 1
        assert value(samples, "rocketmq_broker_in_sync_replicas") == 3
        assert value(samples, "rocketmq_broker_role_changes_total") >= 1
        slave = next(b for b in brokers if b.config.is_slave)
        assert value(await scrape(slave.metrics.port), "rocketmq_broker_in_sync_replicas") == 0
        nursery.cancel_scope.cancel()

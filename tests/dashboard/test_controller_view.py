"""The cluster page's controller-mode view: a group of three brokers and three controllers
(in this process, as `rmq dev --cluster controller` runs them) shows each broker's role,
master epoch and SyncStateSet."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import trio

from rmq.broker.controller import BrokerController
from rmq.controller.server import ControllerServer
from rmq.dashboard.app import Settings, serve
from rmq.tools.dev import controller_broker_configs, controller_configs
from tests.broker.cluster import loopback_namesrv
from tests.ports import free_ports


async def test_cluster_page_shows_each_brokers_epoch_and_sync_state_set(tmp_path: Path) -> None:
    base = free_ports(21, below=2, extra=range(30010, 30013))  # brokers' ports and the controllers' (+30010)
    async with loopback_namesrv() as ns, trio.open_nursery() as nursery:
        members = controller_configs(tmp_path, base_port=base)
        for member in members:
            await nursery.start(ControllerServer(member).serve)
        for config in controller_broker_configs(ns.address, members, tmp_path, base_port=base):
            await nursery.start(BrokerController(config).serve)
        where = await nursery.start(serve, Settings(namesrv=[ns.address]), "127.0.0.1", 0)
        async with httpx.AsyncClient(base_url=f"http://{where}", timeout=10) as http:
            with trio.move_on_after(40):  # an election, slaves catching up, the set growing to three
                while True:
                    page = (await http.get("/cluster")).text
                    table = page[page.find('id="controller-mode"') :]
                    roles = re.findall(r"<td>(?:<strong>)?(SYNC_MASTER|SLAVE)(?:</strong>)?</td>", table)
                    if sorted(roles) == ["SLAVE", "SLAVE", "SYNC_MASTER"] and "<td>1,2,3</td>" in table:
                        break
                    await trio.sleep(0.3)
        assert sorted(roles) == ["SLAVE", "SLAVE", "SYNC_MASTER"] and "<td>1,2,3</td>" in page, table
        assert 'id="controller-mode"' in page and "<h2>Controller-mode groups</h2>" in page
        nursery.cancel_scope.cancel()

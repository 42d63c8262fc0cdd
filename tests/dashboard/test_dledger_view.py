"""The cluster page's DLedger view: a group of three members (in this process, as `rmq dev
--cluster dledger` runs them) shows each member's Raft role, term and leader."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import trio

from rmq.broker.controller import BrokerController
from rmq.dashboard.app import Settings, serve
from rmq.tools.dev import dledger_configs
from tests.broker.cluster import loopback_namesrv
from tests.ports import free_ports


async def test_cluster_page_shows_each_dledger_members_role(tmp_path: Path) -> None:
    base = free_ports(21, below=2, extra=range(30000, 30003))  # members' ports and DLedger ports (+30000)
    async with loopback_namesrv() as ns, trio.open_nursery() as nursery:
        for config in dledger_configs(ns.address, tmp_path, base_port=base):
            await nursery.start(BrokerController(config).serve)
        where = await nursery.start(serve, Settings(namesrv=[ns.address]), "127.0.0.1", 0)
        async with httpx.AsyncClient(base_url=f"http://{where}", timeout=10) as http:
            with trio.fail_after(30):  # an election, then the leader registers as brokerId 0
                while True:
                    page = (await http.get("/cluster")).text
                    roles = re.findall(r"<td>(?:<strong>)?(LEADER|FOLLOWER|CANDIDATE)(?:</strong>)?</td>", page)
                    if sorted(roles) == ["FOLLOWER", "FOLLOWER", "LEADER"]:
                        break
                    await trio.sleep(0.2)
        assert 'id="dledger"' in page and "<h2>DLedger groups</h2>" in page
        member = r"<td>RaftNode00</td><td>(n\d)</td><td>RaftNode00</td><td>[^<]+</td>"
        leader = re.search(member + r"\s*<td><strong>LEADER", page)
        assert leader is not None, page
        # every member names the same leader
        assert len(re.findall(rf"<td class=\"num\">\d+</td><td>{leader.group(1)}</td>", page)) == 3, page
        nursery.cancel_scope.cancel()

"""The official 5.x producer (tests/proxy/client5.py, a child process) through the proxy to
broker processes whose master (master/slave or controller mode), or DLedger leader, is killed
with SIGKILL while it sends:
every message the client got a SendReceipt for is consumable afterwards, and the producer
gets receipts again once the group serves again.

The name server and the proxy run in the test's process; the brokers are processes
(tests/broker/ha/procs.py). Loads are bounded in count and time."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from rmq.client import ConsumeFromWhere, Message, Producer, PushConsumer
from rmq.client.errors import MQClientError
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.message import MessageExt
from rmq.proxy import ProxyConfig, ProxyServer
from rmq.remoting import RemotingClient, RemotingError
from tests.broker.cluster import loopback_namesrv
from tests.broker.controller_mode.group import ControllerGroup, all_in_sync, master_of
from tests.broker.ha.procs import BrokerProcess, DLedgerGroup

from .conftest import CHILD, CLIENT5, FAST, require_client5, run_client

pytestmark = pytest.mark.slow

TOPIC = "FailoverTopic"
SENDS = 5000  # one every 20 ms or so, failed ones faster: the load outlasts the outage...
SEND_SECONDS = 90.0  # ...and stops when the test has seen enough, or after this
KILL_AFTER = 60  # receipts before the kill
CONSUME_SECONDS = 60.0


class Client5Run:
    """client5.py running in the background; its JSON lines as they come."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.lines: list[dict[str, Any]] = []
        self.stderr = b""  # its tail

    async def read(self) -> None:
        assert self.proc.stdout is not None
        buf = b""
        while chunk := await self.proc.stdout.receive_some(65536):
            buf += chunk
            *complete, buf = buf.split(b"\n")
            self.lines += [json.loads(line) for line in complete if line.startswith(b"{")]

    async def read_stderr(self) -> None:
        """Kept reading, so that a chatty client never blocks on a full pipe."""
        assert self.proc.stderr is not None
        while chunk := await self.proc.stderr.receive_some(65536):
            self.stderr = (self.stderr + chunk)[-3000:]

    @property
    def receipts(self) -> dict[int, str]:
        """Message number -> message id, for every send that got a receipt."""
        return {line["i"]: line["sent"] for line in self.lines if "sent" in line}

    @property
    def failures(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if "failed" in line]

    async def until_receipts(self, n: int, timeout: float) -> None:
        with trio.move_on_after(timeout):
            while len(self.receipts) < n:
                await trio.sleep(0.02)
            return
        raise AssertionError(f"{len(self.receipts)} receipts, not {n}, in {timeout} s; last lines {self.lines[-3:]}")


@asynccontextmanager
async def paced_sender(endpoint: str) -> AsyncIterator[Client5Run]:
    """client5.py send_paced in the background; the block's end stops it (its stdin ends)
    and waits for it to finish."""
    require_client5()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(CLIENT5)
    args = [sys.executable, str(CHILD), endpoint, "send_paced", TOPIC, "unused", str(SENDS), str(SEND_SECONDS)]
    proc = await trio.lowlevel.open_process(args, stdin=-1, stdout=-1, stderr=-1, env=env)  # -1: a pipe
    run = Client5Run(proc)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run.read)
            nursery.start_soon(run.read_stderr)
            try:
                yield run
            except BaseException:
                proc.kill()  # its pipes close, and the readers end
                raise
            assert proc.stdin is not None
            await proc.stdin.aclose()
            with trio.fail_after(60):
                await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0 and run.lines[-1:] == [{"done": True}], (proc.returncode, run.lines[-3:], run.stderr)


async def consume_ids(namesrv: str, group: str, want: set[str]) -> set[str]:
    """The UNIQ_KEYs a new push consumer group reads from the first offset, until it has
    all of `want` or CONSUME_SECONDS passed."""
    seen: set[str] = set()

    def handler(msg: MessageExt) -> None:
        seen.add(msg.properties.get("UNIQ_KEY", ""))

    consumer = PushConsumer(
        group, namesrv, handler=handler, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, pull_error_delay=0.5
    )
    consumer.subscribe(TOPIC)
    async with consumer:
        with trio.move_on_after(CONSUME_SECONDS):
            while not want <= seen:
                await trio.sleep(0.2)
    return seen


async def create_topic(client: RemotingClient, addr: str) -> None:
    ext = {"topic": TOPIC, "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext), 10)
    assert r.code == ResponseCode.SUCCESS, r.remark


@asynccontextmanager
async def proxy_of(namesrv: str) -> AsyncIterator[str]:
    config = ProxyConfig.from_mapping({"namesrvAddr": namesrv, "grpcServerPort": 0})
    async with ProxyServer(config, host="127.0.0.1") as server:
        yield f"127.0.0.1:{server.port}"


async def first_send_ok(namesrv: str, timeout: float = 30) -> None:
    """Until our producer gets SEND_OK: the group takes sends (a SYNC_MASTER's slave is in)."""
    with trio.fail_after(timeout):
        async with Producer("warm-up", namesrv=namesrv, retry_times=0, send_timeout=3) as producer:
            while True:
                try:
                    if (await producer.send(Message(TOPIC, b"warm-up"))).status.value == "SEND_OK":
                        return
                except MQClientError:
                    pass
                await trio.sleep(0.2)


def missing(want: dict[int, str], seen: set[str]) -> list[int]:
    return sorted(i for i, msg_id in want.items() if msg_id not in seen)


async def test_sync_master_killed_while_a_5x_producer_sends(tmp_path: Path) -> None:
    """SYNC_MASTER and its slave: killed, the master's receipted messages are all on the
    slave (consumed from it while the master is down); restarted, it takes sends again and
    serves everything."""
    async with loopback_namesrv() as ns, RemotingClient() as client:
        master = BrokerProcess(tmp_path / "m", ns.address, "broker-a", role="SYNC_MASTER")
        slave = BrokerProcess(tmp_path / "s", ns.address, "broker-a", role="SLAVE")
        try:
            for p in (master, slave):
                await trio.to_thread.run_sync(p.start)
            await create_topic(client, master.address)
            await first_send_ok(ns.address)
            async with proxy_of(ns.address) as endpoint, paced_sender(endpoint) as run:
                await run.until_receipts(KILL_AFTER, 60)
                await trio.to_thread.run_sync(master.kill)
                at_kill = dict(run.receipts)
                on_slave = await consume_ids(ns.address, "from-slave", set(at_kill.values()))
                assert not missing(at_kill, on_slave), (missing(at_kill, on_slave), slave.log())
                before_restart = len(run.receipts)
                await trio.to_thread.run_sync(master.start)
                # the proxy sends to it again (its route refreshed after a failed send)
                await run.until_receipts(before_restart + 20, 60)
            receipts = run.receipts
            seen = await consume_ids(ns.address, "after", set(receipts.values()))
            assert not missing(receipts, seen), (missing(receipts, seen), run.failures[:3], master.log())
        finally:
            for p in (master, slave):
                await trio.to_thread.run_sync(p.stop)


async def dledger_leader(client: RemotingClient, group: DLedgerGroup, timeout: float = 30) -> BrokerProcess:
    """The member that says it leads and serves as the master."""
    with trio.fail_after(timeout):
        while True:
            for m in group.members:
                if m.proc is None or m.proc.poll() is not None:
                    continue
                request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
                try:
                    r = await client.invoke(m.address, request, 1.0)
                except (RemotingError, trio.TooSlowError):
                    continue
                table = json_body.loads(r.body)["table"] if r.code == ResponseCode.SUCCESS else {}
                if table.get("dLegerRole") == "LEADER" and table.get("brokerRole") != "SLAVE":
                    return m
            await trio.sleep(0.2)


async def test_dledger_leader_killed_while_a_5x_producer_sends(tmp_path: Path) -> None:
    """Three DLedger members: the leader killed, a new one elected; the producer gets
    receipts again through the proxy and every receipted message is consumable from the
    new leader, the old one still down."""
    async with loopback_namesrv() as ns, RemotingClient() as client:
        group = DLedgerGroup(tmp_path, ns.address)
        try:
            await trio.to_thread.run_sync(group.start)
            leader = await dledger_leader(client, group)
            await create_topic(client, leader.address)  # a new leader adopts it from its store
            await first_send_ok(ns.address)
            async with proxy_of(ns.address) as endpoint, paced_sender(endpoint) as run:
                await run.until_receipts(KILL_AFTER, 60)
                await trio.to_thread.run_sync(leader.kill)
                at_kill = len(run.receipts)
                successor = await dledger_leader(client, group)
                assert successor is not leader
                # the proxy finds the new leader (its route refreshed after a failed send)
                await run.until_receipts(at_kill + 20, 60)
            receipts = run.receipts
            seen = await consume_ids(ns.address, "after", set(receipts.values()))
            assert not missing(receipts, seen), (missing(receipts, seen), run.failures[:3], group.roles())
        finally:
            await trio.to_thread.run_sync(group.stop)


@asynccontextmanager
async def controller_group(tmp_path: Path) -> AsyncIterator[tuple[str, RemotingClient, ControllerGroup]]:
    """RocketMQ 5's production shape: three controllers and three brokers with
    allAckInSyncStateSet, every broker in the master's SyncStateSet, the topic made and sends
    taken; yields (name server, client, group), the name server in this process."""
    async with loopback_namesrv() as ns, RemotingClient() as client:
        group = ControllerGroup(tmp_path, ns.address, allAckInSyncStateSet="true")
        try:
            await trio.to_thread.run_sync(group.start)
            master, _ = await master_of(client, group)
            await all_in_sync(client, master)
            await create_topic(client, master.address)  # replicated: the next master has it
            await first_send_ok(ns.address)
            yield ns.address, client, group
        finally:
            await trio.to_thread.run_sync(group.stop)


async def kill_master(client: RemotingClient, group: ControllerGroup) -> BrokerProcess:
    """SIGKILL the master; the successor the controllers elect (a higher epoch)."""
    master, epoch = await master_of(client, group)
    await trio.to_thread.run_sync(master.kill)
    successor, new_epoch = await master_of(client, group)
    assert successor is not master and new_epoch > epoch
    return successor


@asynccontextmanager
async def fast_proxy_over(namesrv: str, prefix: str, n: int) -> AsyncIterator[str]:
    """Our producer sends `n` messages `prefix-0`..., then a proxy with short receive times
    (FAST) in front of the group; yields its endpoint."""
    async with Producer(f"{prefix}-sender", namesrv=namesrv) as producer:
        for i in range(n):
            assert (await producer.send(Message(TOPIC, f"{prefix}-{i}".encode()))).status.value == "SEND_OK"
    config = ProxyConfig.from_mapping({"namesrvAddr": namesrv, "grpcServerPort": 0, **FAST})
    async with ProxyServer(config, host="127.0.0.1") as proxy:
        yield f"127.0.0.1:{proxy.port}"


async def test_controller_mode_master_killed_while_a_5x_producer_sends(tmp_path: Path) -> None:
    """A controller-mode group behind the proxy. The master killed, the controllers elect
    another from the SyncStateSet; the producer gets receipts again through the proxy, and
    every receipted message is consumable, the old master still down."""
    async with controller_group(tmp_path) as (ns, client, group):
        async with proxy_of(ns) as endpoint, paced_sender(endpoint) as run:
            await run.until_receipts(KILL_AFTER, 60)
            successor = await kill_master(client, group)
            at_kill = len(run.receipts)
            # the proxy finds the new master (its route refreshed after a failed send)
            await run.until_receipts(at_kill + 20, 60)
        receipts = run.receipts
        seen = await consume_ids(ns, "after", set(receipts.values()))
        assert not missing(receipts, seen), (missing(receipts, seen), run.failures[:3], successor.log())


async def test_controller_mode_unacked_pops_come_back_from_the_new_master(tmp_path: Path) -> None:
    """POP across a failover: a 5.x SimpleConsumer receives every message and acks none; the
    master is killed. The new master hands each out again once its invisible time passed
    (the checkpoints were replicated with the log, or its offset was older): nothing popped
    and not acked is lost with the old master."""
    n = 20
    want = {f"pop-{i}" for i in range(n)} | {"warm-up"}  # and first_send_ok's message
    async with controller_group(tmp_path) as (ns, client, group), fast_proxy_over(ns, "pop", n) as endpoint:
        held = await run_client(endpoint, "receive_no_ack", TOPIC, "PopFailover", str(n + 1), "8")
        assert {m["body"] for m in held[:-1]} == want, held[-1]
        await trio.sleep(1.0)  # the checkpoints reach the slaves (replication takes ms)
        successor = await kill_master(client, group)
        lines = await run_client(endpoint, "receive_retrying", TOPIC, "PopFailover", str(n + 1), "60")
        again = [line for line in lines if "body" in line]
        failed = [line for line in lines if "receive_failed" in line]
        assert lines[-1] == {"received": n + 1}, (lines[-1], failed[:3], successor.log())
        assert {m["body"] for m in again} == want
        # the proxy fetched the route at the first failure: the next receive found the new master
        assert len(failed) <= 2, failed


async def test_controller_mode_5x_pulls_reach_the_new_master(tmp_path: Path) -> None:
    """The 5.x PullConsumer's PullMessage (with the stub: no 5.x client has a PullConsumer)
    after a master failover: a failed pull fetches the route again, so the next one reads
    from the new master, which holds every message the old one acknowledged."""
    n = 20
    async with controller_group(tmp_path) as (ns, client, group), fast_proxy_over(ns, "pull", n) as endpoint:
        *_, before = await run_client(endpoint, "pull_retrying", TOPIC, "PullFailover", str(n + 1), "20")
        assert before == {"pulled": n + 1, "failures": 0}  # and the proxy holds the route
        successor = await kill_master(client, group)
        *failed, after = await run_client(endpoint, "pull_retrying", TOPIC, "PullFailover", str(n + 1), "60")
        assert after["pulled"] == n + 1, (after, failed[:3], successor.log())
        assert after["failures"] <= 2, failed

"""Metadata writes off the event loop: a heartbeat naming many new groups while another
client pings, what the files hold after a clean stop and after a kill -9, and an
operator's change, on disk when answered."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from rmq.broker.jsonfile import read_json
from rmq.broker.processors.client_manage import NEW_GROUPS_PER_REQUEST
from rmq.broker.topics import WRITE_DELAY
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.remoting import RemotingClient

from .cluster import Cluster

GROUPS = 1000
REPO = Path(__file__).resolve().parents[2]


def big_heartbeat(groups: int, client_id: str = "big@1") -> bytes:
    return json.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "groupName": f"G{i:04d}",
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "subscriptionDataSet": [{"topic": f"T{i}", "subString": "*", "subVersion": 1}],
                }
                for i in range(groups)
            ],
        }
    ).encode()


def groups_on_disk(config_dir: Path) -> tuple[set[str], set[str]]:
    """The G* groups in subscriptionGroup.json and the %RETRY%G* topics in topics.json."""
    groups = read_json(config_dir / "subscriptionGroup.json", lambda o: set(o["subscriptionGroupTable"]))  # type: ignore[index]
    topics = read_json(config_dir / "topics.json", lambda o: set(o["topicConfigTable"]))  # type: ignore[index]
    return {g for g in groups or () if g.startswith("G")}, {t for t in topics or () if t.startswith("%RETRY%G")}


async def heartbeat_until_all_created(client: RemotingClient, addr: str, body: bytes, groups: int) -> int:
    """Send the heartbeat until every group exists (each creates at most NEW_GROUPS_PER_REQUEST)."""
    for sent in range(1, groups // NEW_GROUPS_PER_REQUEST + 2):
        answer = await client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, {}, body), 30)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        if sent * NEW_GROUPS_PER_REQUEST >= groups:
            return sent
    raise AssertionError("unreachable")


async def test_a_big_heartbeat_registers_all_and_creates_a_bounded_number(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="rmq.broker.client_manage")
    broker = cluster.broker
    addr = broker.address
    body = big_heartbeat(GROUPS)
    async with RemotingClient() as client:
        answer = await client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, {}, body), 30)
        assert answer.code == ResponseCode.SUCCESS
        # every consumer is registered; NEW_GROUPS_PER_REQUEST groups were created, the rest deferred
        assert all(broker.clients.consumer_group(f"G{i:04d}") is not None for i in range(GROUPS))
        assert sum(g.group_name.startswith("G") for g in broker.subscriptions) == NEW_GROUPS_PER_REQUEST
        warning = [r.getMessage() for r in caplog.records if "new consumer groups" in r.getMessage()]
        assert len(warning) == 1
        assert f"names {GROUPS} new consumer groups; {NEW_GROUPS_PER_REQUEST} created" in warning[0]
        # a deferred group's first pull creates it
        pull = {
            "consumerGroup": f"G{GROUPS - 1:04d}",
            "topic": "TBW102",
            "queueId": 0,
            "queueOffset": 0,
            "maxMsgNums": 1,
            "sysFlag": 0,
            "commitOffset": 0,
            "suspendTimeoutMillis": 0,
            "subscription": "*",
            "subVersion": 0,
        }
        await client.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, pull), 5)
        assert broker.subscriptions.get(f"G{GROUPS - 1:04d}") is not None
        # and the client's next heartbeats create the rest
        await heartbeat_until_all_created(client, addr, body, GROUPS)
    assert sum(g.group_name.startswith("G") for g in broker.subscriptions) == GROUPS
    await cluster.stop()  # a clean stop writes whatever is pending
    groups, retry_topics = groups_on_disk(cluster.store / "config")
    assert len(groups) == len(retry_topics) == GROUPS
    await cluster.start()


async def test_an_operators_change_is_on_disk_when_answered(cluster: Cluster) -> None:
    ext = {"topic": "Ops", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "topicFilterType": "SINGLE_TAG"}
    assert (await cluster.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)).code == ResponseCode.SUCCESS
    on_disk = json_body.loads((cluster.store / "config" / "topics.json").read_bytes())
    assert "Ops" in on_disk["topicConfigTable"]
    group = json_body.dumps({"groupName": "OpsGroup", "retryMaxTimes": 3})
    assert (await cluster.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group)).code == 0
    on_disk = json_body.loads((cluster.store / "config" / "subscriptionGroup.json").read_bytes())
    assert on_disk["subscriptionGroupTable"]["OpsGroup"]["retryMaxTimes"] == 3


def test_a_heartbeat_of_1000_new_groups_stalls_no_one_and_survives_a_kill_9(tmp_path: Path) -> None:
    """A broker process answers another client's pings while it handles a heartbeat naming
    1000 new groups; the groups reach its files WRITE_DELAY (plus a write) after they were
    created, so a SIGKILL then loses none."""
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerName=broker-k\nlistenPort=0\nbrokerIP1=127.0.0.1\nbindAddress=127.0.0.1\n"
        "vipChannelEnable=false\nmappedFileSizeCommitLog=1048576\nmaxMessageSize=65536\n"
    )
    store = tmp_path / "store"
    env = {**os.environ, "RMQ_RUN_DIR": str(tmp_path / "run"), "NAMESRV_ADDR": ""}
    body = big_heartbeat(GROUPS)
    with open(tmp_path / "stderr.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rmq", "broker", "-c", str(conf), "--store", str(store)],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
            cwd=REPO,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "boot success" in line, (tmp_path / "stderr.log").read_text()
            addr = line.split("[", 1)[1].split(", ", 1)[1].split("]", 1)[0]

            async def scenario() -> tuple[float, float]:
                ping = {"topic": "TBW102", "queueId": 0}
                worst = 0.0
                async with RemotingClient() as heartbeats, RemotingClient() as pinger:
                    await pinger.invoke(addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, ping), 5)
                    stop = trio.Event()

                    async def pings() -> None:
                        nonlocal worst
                        while not stop.is_set():  # bounded: the heartbeats below end it
                            start = time.perf_counter()
                            request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, ping)
                            assert (await pinger.invoke(addr, request, 120)).code == ResponseCode.SUCCESS
                            worst = max(worst, time.perf_counter() - start)
                            await trio.sleep(0.001)

                    with trio.fail_after(240):
                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(pings)
                            await trio.sleep(0.05)
                            await heartbeat_until_all_created(heartbeats, addr, body, GROUPS)
                            stop.set()
                answered = time.monotonic()
                for _ in range(500):  # bounded: 5 s and more
                    groups, topics = groups_on_disk(store / "config")
                    if len(groups) == len(topics) == GROUPS:
                        return worst, time.monotonic() - answered
                    await trio.sleep(0.01)
                raise AssertionError("the groups never reached the files")

            worst, took = trio.run(scenario)
            # Before, each new group rewrote and fsynced whole files on the event loop: a ping
            # waited seconds behind the heartbeat. Now it waits for one step of it (a few ms);
            # the bound leaves room for a loaded machine.
            assert worst < 0.5, f"a ping waited {worst * 1000:.0f} ms behind the heartbeats"
            assert took < WRITE_DELAY + 3.0  # the promise, with room for a loaded disk
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert (store / "abort").exists()  # it did die without a clean stop
    groups, topics = groups_on_disk(store / "config")
    assert len(groups) == len(topics) == GROUPS

"""Start, stop and restart: registration with the name server, persistence, clean store
shutdown, and the mqbroker command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio
import trio.testing

from rmq.broker.controller import BrokerController
from rmq.broker.startup import main
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.headers import CreateTopicRequestHeader
from rmq.protocol.message import iter_records

from .cluster import Cluster, broker_config
from .test_send_pull import pull_ext, send_ext


async def route(cluster: Cluster, topic: str) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return await cluster.client.invoke(cluster.namesrv.address, request, 5)


async def test_registered_at_start_and_removed_at_stop(cluster: Cluster) -> None:
    r = await route(cluster, "TBW102")
    assert r.code == ResponseCode.SUCCESS
    data = json_body.loads(r.body)
    assert data["brokerDatas"][0]["brokerAddrs"] == {"0": cluster.broker.address}
    assert data["brokerDatas"][0]["cluster"] == "TestCluster"
    assert data["queueDatas"][0]["perm"] == 7
    await cluster.stop()
    r = await route(cluster, "TBW102")
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    await cluster.start()  # for the fixture's own stop


async def test_auto_created_topic_is_registered_at_once(cluster: Cluster) -> None:
    r = await cluster.call(RequestCode.SEND_MESSAGE, send_ext(topic="Brand_New"), b"x")
    assert r.code == 0
    with trio.fail_after(5):
        while (await route(cluster, "Brand_New")).code != ResponseCode.SUCCESS:
            await trio.sleep(0.01)
    queue = json_body.loads((await route(cluster, "Brand_New")).body)["queueDatas"][0]
    assert (queue["readQueueNums"], queue["writeQueueNums"], queue["perm"]) == (4, 4, 6)


async def test_metadata_and_messages_survive_a_restart(cluster: Cluster) -> None:
    create = CreateTopicRequestHeader(topic="Kept", read_queue_nums=3, write_queue_nums=3, order=True)
    assert (await cluster.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext())).code == 0
    r = await cluster.call(RequestCode.SEND_MESSAGE, send_ext(topic="Kept", queue_id=2), b"durable")
    assert r.code == 0
    q = {"consumerGroup": "G", "topic": "Kept", "queueId": 2}
    await cluster.call(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": 1})
    group = json.dumps({"groupName": "KeptGroup", "retryMaxTimes": 5}).encode()
    assert (await cluster.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group)).code == 0

    await cluster.stop()
    store = cluster.store
    assert not (store / "abort").exists()
    assert (store / "config" / "consumerOffset.json").read_text() == '{"offsetTable":{"Kept@G":{2:1}}}'
    await cluster.start()

    broker = cluster.broker
    kept = broker.topics.get("Kept")
    assert kept is not None and kept.read_queue_nums == 3 and kept.order
    assert broker.subscriptions.get("KeptGroup").retry_max_times == 5  # type: ignore[union-attr]
    r = await cluster.call(RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert r.ext_fields == {"offset": "1"}
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("Kept", 2, 0))
    assert [m.body for m in iter_records(r.body)] == [b"durable"]
    r = await cluster.call(RequestCode.SEND_MESSAGE, send_ext(topic="Kept", queue_id=2), b"after")
    assert r.ext_fields["queueOffset"] == "1"


async def test_offsets_are_written_every_5_s(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    path = cluster.store / "config" / "consumerOffset.json"
    await cluster.call(
        RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "T", "queueId": 3, "commitOffset": 9}
    )
    await trio.sleep(6)
    for _ in range(500):  # the write runs in a worker thread: give it real time
        if path.exists():
            break
        await trio.to_thread.run_sync(time.sleep, 0.01)
    assert path.read_text() == '{"offsetTable":{"T@G":{3:9}}}'


async def test_async_with_and_port_zero(tmp_path: Path) -> None:
    config = broker_config(tmp_path / "s", vipChannelEnable="false")
    async with BrokerController(config) as broker:
        assert broker.port > 0 and broker.vip_port is None
        assert broker.address == f"127.0.0.1:{broker.port}"
        assert (tmp_path / "s" / "abort").exists()
    assert not (tmp_path / "s" / "abort").exists()
    assert json_body.loads((tmp_path / "s" / "config" / "topics.json").read_bytes())["topicConfigTable"]["TBW102"]


async def test_second_broker_on_the_same_store_is_refused(tmp_path: Path) -> None:
    from rmq.store import StoreLockedError

    config = broker_config(tmp_path / "s")
    async with BrokerController(config):
        with pytest.raises(StoreLockedError):
            async with BrokerController(config):
                pass


def test_print_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-x\nlistenPort=30911\n")
    assert main(["-c", str(conf), "-n", "1.2.3.4:9876", "-p"]) == 0
    out = capsys.readouterr().out
    assert "brokerName=broker-x\n" in out and "listenPort=30911\n" in out and "namesrvAddr=1.2.3.4:9876\n" in out
    assert main(["-c", str(conf), "-m", "--store", str(tmp_path / "st")]) == 0
    assert f"storePathRootDir={tmp_path / 'st'}\n" in capsys.readouterr().out
    conf.write_text("listenPort=x\n")
    assert main(["-c", str(conf), "-p"]) == 2
    assert "listenPort" in capsys.readouterr().err


def test_mqbroker_process_boots_and_stops_on_sigterm(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerName=broker-p\nlistenPort=0\nbrokerIP1=127.0.0.1\nbindAddress=127.0.0.1\n"
        "mappedFileSizeCommitLog=1048576\nmaxMessageSize=65536\n"
    )
    env = {**os.environ, "RMQ_RUN_DIR": str(tmp_path / "run"), "NAMESRV_ADDR": ""}
    with open(tmp_path / "stderr.log", "w") as log:  # a file, not a pipe nobody reads
        proc = subprocess.Popen(
            [sys.executable, "-m", "rmq", "broker", "-c", str(conf), "--store", str(tmp_path / "store")],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
            cwd=Path(__file__).resolve().parents[2],
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("The broker[broker-p, 127.0.0.1:") and "boot success. serializeType=JSON" in line
            assert proc.stdout.readline() == f"The store path is {tmp_path / 'store'}\n"
            port = line.split(":")[1].split("]")[0]
            pid_file = tmp_path / "run" / f"broker-{port}.pid"
            assert pid_file.read_text().strip() == str(proc.pid)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0
            assert not pid_file.exists()
            assert not (tmp_path / "store" / "abort").exists()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


async def test_port_in_use_is_an_os_error_and_the_store_is_closed(tmp_path: Path) -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    async with listener:
        with pytest.raises(OSError):
            async with BrokerController(broker_config(tmp_path / "s", listenPort=str(port))):
                pass
    assert not (tmp_path / "s" / "abort").exists()


def test_mqbroker_port_in_use_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        conf = tmp_path / "broker.conf"
        conf.write_text(f"listenPort={port}\nbindAddress=127.0.0.1\nvipChannelEnable=false\n")
        assert main(["-c", str(conf), "--store", str(tmp_path / "s")]) == 1
    assert "cannot start" in capsys.readouterr().err


async def test_cancelled_broker_still_unregisters(cluster: Cluster, tmp_path: Path) -> None:
    config = cluster.config.replace(broker_name="broker-b", store_path_root_dir=tmp_path / "b")
    async with trio.open_nursery() as nursery:
        await nursery.start(BrokerController(config).serve)
        assert (await route(cluster, "broker-b")).code == ResponseCode.SUCCESS
        nursery.cancel_scope.cancel()  # no shutdown(): cancelled from outside
    assert (await route(cluster, "broker-b")).code == ResponseCode.TOPIC_NOT_EXIST
    assert not (tmp_path / "b" / "abort").exists()

"""The quickstart pair (`rmq quickstart producer|consumer`) moves 1,000 messages through
our name server and broker on 127.0.0.1.

Each tool runs its own `trio.run`, so it runs in a worker thread while the servers run
in the test's Trio loop.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import trio

from rmq.broker.config import BrokerConfig
from rmq.broker.controller import BrokerController
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.server import NamesrvServer
from rmq.tools.quickstart import consumer_main, producer_main

SEND_RESULT = re.compile(
    r"^SendResult \[sendStatus=SEND_OK, msgId=[0-9A-F]{32}, offsetMsgId=[0-9A-F]{32}, "
    r"messageQueue=MessageQueue \[topic=TopicTest, brokerName=broker-a, queueId=\d\], queueOffset=\d+\]$"
)
RECEIVED = re.compile(r"^ConsumeMessageThread_\d+ Receive New Messages: \[MessageExt \[brokerName=broker-a, .*\]\]$")


async def test_quickstart_pair_moves_1000_messages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0, kv_config_path=None)) as ns:
        config = BrokerConfig(
            broker_name="broker-a",
            namesrv_addr=(ns.address,),
            broker_ip1="127.0.0.1",
            listen_port=0,
            bind_address="127.0.0.1",
            vip_channel_enable=False,
            store_path_root_dir=tmp_path / "store",
            mapped_file_size_commit_log=64 * 1024 * 1024,
            mapped_file_size_consume_queue=30_000 * 20,
        )
        async with BrokerController(config):
            with trio.fail_after(10):
                while not ns.routes.live:
                    await trio.sleep(0.02)
            with trio.fail_after(120):
                assert await trio.to_thread.run_sync(producer_main, ["-n", ns.address]) == 0
            sent = capsys.readouterr().out.splitlines()
            assert len(sent) == 1000
            bad = [line for line in sent if not SEND_RESULT.match(line)]
            assert not bad, bad[:3]

            argv = ["-n", ns.address, "--count", "1000", "--seconds", "60"]
            with trio.fail_after(120):
                assert await trio.to_thread.run_sync(consumer_main, argv) == 0
            lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Consumer Started."
    received = lines[1:]
    assert len(received) == 1000
    assert all(RECEIVED.match(line) for line in received), received[:2]
    bodies = sorted(
        bytes(int(b) for b in re.search(r"body=\[([-\d, ]+)\]", line).group(1).split(", ")).decode()  # type: ignore[union-attr]
        for line in received
    )
    assert bodies == sorted(f"Hello RocketMQ {i}" for i in range(1000))
    assert all("TAGS=TagA" in line and "topic='TopicTest'" in line for line in received)

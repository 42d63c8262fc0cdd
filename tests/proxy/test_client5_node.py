"""The official 5.x Node.js client (npm rocketmq-client-nodejs, gRPC by @grpc/grpc-js over Node's
own HTTP/2) through the proxy to a real broker: a second official client, on another gRPC and
HTTP/2 stack than the Python client's grpcio. The client runs as `node tests/proxy/client5.mjs`,
installed by scripts/bootstrap.sh in .cache/node5 at the versions tests/proxy/node pins; the
tests skip without Node.js or the client (fail in CI)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from rmq.client import Message, Producer
from rmq.protocol import properties as P
from rmq.protocol.message import decode_record
from rmq.proxy import ProxyServer
from tests.client.conftest import Cluster

from .conftest import TX_TOPIC

NODE5 = Path(__file__).resolve().parents[2] / ".cache" / "node5" / "node_modules"
CHILD = Path(__file__).with_name("client5.mjs")
TOPIC = "NodeTopic"


async def run_node(
    endpoint: str, home: Path, *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Run client5.mjs (`env` added to this process's); its JSON lines. Fails unless it ended
    with {"done": true}."""
    node = shutil.which("node")
    if node is None or not (NODE5 / "rocketmq-client-nodejs").is_dir():
        why = "Node.js or the 5.x Node.js client is missing (scripts/bootstrap.sh puts it in .cache/node5)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    # the client logs to ~/logs/rocketmq: a home of the test's own
    child_env = {**os.environ, **(env or {}), "NODE_PATH": str(NODE5), "HOME": str(home)}
    with trio.fail_after(timeout):
        result = await trio.run_process(
            [node, str(CHILD), endpoint, *args], capture_stdout=True, capture_stderr=True, env=child_env, check=False
        )
    lines = [json.loads(line) for line in result.stdout.decode().splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines or lines[-1] != {"done": True}:
        raise AssertionError(
            f"client5.mjs {args} exited {result.returncode}: {lines}\n{result.stderr.decode()[-3000:]}"
        )
    return lines[:-1]


def stored(cluster: Cluster, topic: str) -> list[tuple[int, Any]]:
    """(queue id, message) of every message of `topic` in the broker, in queue order."""
    store = cluster.broker.message_store
    out = []
    for queue_id in range(4):
        records = store.get_message(topic, queue_id, 0, 1000).records
        out += [(queue_id, decode_record(r)[0]) for r in records]
    return out


async def test_node_producer_sends_normal_and_fifo_messages(
    cluster: Cluster, proxy: ProxyServer, tmp_path: Path
) -> None:
    await cluster.create_topic(TOPIC)
    endpoint = f"127.0.0.1:{proxy.port}"
    sent = await run_node(endpoint, tmp_path, "send", TOPIC, "8")
    assert [line["sent"] for line in sent] == list(range(8)) and len({line["id"] for line in sent}) == 8
    fifo = await run_node(endpoint, tmp_path, "fifo", TOPIC, "12", "3")
    assert len(fifo) == 12
    messages = stored(cluster, TOPIC)
    by_body = {m.body.decode(): (queue_id, m) for queue_id, m in messages}
    assert set(by_body) == {f"node-{i}" for i in range(8)} | {f"node-{i}" for i in range(12)} and len(messages) == 20
    # each stored as sent: its tag, keys and the message id the client made (UNIQ_KEY)
    ids = {line["id"] for line in sent + fifo}
    assert {m.properties[P.UNIQ_KEY] for _, m in messages} == ids
    assert all(m.properties[P.TAGS] == "TagN" for _, m in messages)
    assert {m.properties[P.KEYS] for _, m in messages} == {f"key-{i}" for i in range(12)}
    # a message group goes to one queue, in the order sent
    groups: dict[str, list[tuple[int, int]]] = {}
    for queue_id, m in messages:
        if P.SHARDING_KEY in m.properties:
            groups.setdefault(m.properties[P.SHARDING_KEY], []).append((queue_id, m.queue_offset))
    assert sorted(groups) == ["g0", "g1", "g2"]
    for placed in groups.values():
        assert len({queue_id for queue_id, _ in placed}) == 1 and len(placed) == 4


async def test_node_simple_consumer_receives_what_a_4x_producer_sent(
    cluster: Cluster, proxy: ProxyServer, tmp_path: Path
) -> None:
    """Mixed generations: our 4.x producer straight to the broker, the Node.js SimpleConsumer
    through the proxy; every message once, acked, and not handed out again."""
    await cluster.create_topic(TOPIC)
    async with Producer("node-mixed", namesrv=cluster.namesrv_addr) as producer:
        for i in range(10):
            result = await producer.send(Message(TOPIC, f"from-4x-{i}".encode(), tags="TagN", keys=f"k{i}"))
            assert result.status.value == "SEND_OK"
    endpoint = f"127.0.0.1:{proxy.port}"
    got = await run_node(endpoint, tmp_path, "receive", TOPIC, "10", "NodeGroup", "3000")
    assert sorted(m["body"] for m in got) == sorted(f"from-4x-{i}" for i in range(10))
    assert all(m["tag"] == "TagN" and m["attempt"] == 1 for m in got)
    assert {tuple(m["keys"]) for m in got} == {(f"k{i}",) for i in range(10)}
    # acked: after their invisible time (3 s) nothing comes back to the group
    await trio.sleep(3.5)
    cq = cluster.broker.message_store
    assert sum(cq.get_max_offset_in_queue(TOPIC, q) for q in range(4)) == 10
    async with Producer("node-mixed", namesrv=cluster.namesrv_addr) as producer:
        assert (await producer.send(Message(TOPIC, b"marker"))).status.value == "SEND_OK"
    [only] = await run_node(endpoint, tmp_path, "receive", TOPIC, "1", "NodeGroup")
    assert only["body"] == "marker"


async def test_node_unacked_message_comes_back(cluster: Cluster, proxy: ProxyServer, tmp_path: Path) -> None:
    """Received with an invisible time of 1 s and not acked, a message is received again with
    its delivery attempt counted, then acked."""
    await cluster.create_topic(TOPIC)
    endpoint = f"127.0.0.1:{proxy.port}"
    [sent] = await run_node(endpoint, tmp_path, "send", TOPIC, "1")
    first, again = await run_node(endpoint, tmp_path, "redeliver", TOPIC, "1", "NodeGroup")
    assert first["id"] == again["id"] == sent["id"]
    assert (first["attempt"], again["attempt"]) == (1, 2) and again["body"] == "node-0"


async def test_node_transactions_commit_roll_back_and_answer_the_check(
    tx_cluster: Cluster, tx_proxy: ProxyServer, tmp_path: Path
) -> None:
    """Committed: visible; rolled back: never; left open: the broker's check comes
    down the client's Telemetry stream to its checker, whose commit makes it visible."""
    endpoint = f"127.0.0.1:{tx_proxy.port}"
    sent, ended = await run_node(endpoint, tmp_path, "commit", TX_TOPIC)
    assert ended == {"ended": "commit"}
    _, ended = await run_node(endpoint, tmp_path, "rollback", TX_TOPIC)
    assert ended == {"ended": "rollback"}
    lines = await run_node(endpoint, tmp_path, "check", TX_TOPIC)
    checked = lines[0]["sent"]
    assert {"checked": checked, "body": "tx-check"} in lines and lines[-1] == {"was_checked": True}
    got = await run_node(endpoint, tmp_path, "receive", TX_TOPIC, "2", "NodeTxGroup")
    assert sorted((m["id"], m["body"]) for m in got) == sorted([(sent["sent"], "tx-commit"), (checked, "tx-check")])
    assert tx_cluster.broker.transactions.checks_sent >= 1
    store = tx_cluster.broker.message_store  # the rolled back one never reached the topic
    assert sum(store.get_max_offset_in_queue(TX_TOPIC, q) for q in range(4)) == 2


@pytest.mark.slow
async def test_node_push_consumer_takes_every_message(cluster: Cluster, proxy: ProxyServer, tmp_path: Path) -> None:
    """Our 4.x producer sends 3,000 messages while the Node.js PushConsumer (QueryAssignment,
    long-polling receives, acks) consumes them: none lost."""
    await cluster.create_topic(TOPIC)
    endpoint = f"127.0.0.1:{proxy.port}"
    n = 3000
    result: list[list[dict[str, Any]]] = []

    async def consume() -> None:
        result.append(await run_node(endpoint, tmp_path, "push", TOPIC, str(n), "NodePushGroup", timeout=90))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        async with Producer("node-push", namesrv=cluster.namesrv_addr) as producer:
            for i in range(n):
                assert (await producer.send(Message(TOPIC, f"m-{i}".encode()))).status.value == "SEND_OK"
    summary = result[0][-1]
    assert summary["distinct"] == n and summary["deliveries"] >= n, summary


async def test_node_client_signs_its_calls_for_acl(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """ACL 1.0 (enableACL over plain_acl.yml): the Node.js client's `sessionCredentials` sign
    each call; the right keys send and receive. A wrong secret is refused at the route query,
    which the client's start reports as a failed route fetch (the proxy logs the reason); a
    topic without PUB, at the send, with 40100 and the reason."""
    from .test_acl import GROUP, SUB_TOPIC, USER, acl_proxy
    from .test_acl import TOPIC as ACL_TOPIC

    right = {"CLIENT5_AK": USER[0], "CLIENT5_SK": USER[1]}
    async with acl_proxy(tmp_path) as endpoint:
        sent = await run_node(endpoint, tmp_path, "send", ACL_TOPIC, "2", env=right)
        got = await run_node(endpoint, tmp_path, "receive", ACL_TOPIC, "2", GROUP, env=right)
        [wrong] = await run_node(endpoint, tmp_path, "send_refused", ACL_TOPIC, env={**right, "CLIENT5_SK": "nope"})
        [no_pub] = await run_node(endpoint, tmp_path, "send_refused", SUB_TOPIC, env=right)
    assert sorted(m["id"] for m in got) == sorted(line["id"] for line in sent)
    assert "Failed to fetch topic routes" in wrong["text"], wrong
    assert "ACL refused QueryRoute from 127.0.0.1: Check signature failed for accessKey=ClientUser" in caplog.text
    assert "40100" in no_pub["text"] and "No PUB permission for topic:SubTopic" in no_pub["text"], no_pub


async def test_node_fifo_groups_are_received_in_send_order(
    cluster: Cluster, proxy: ProxyServer, tmp_path: Path
) -> None:
    """An orderly group (consumeMessageOrderly): the Node.js SimpleConsumer receives each
    message group the Node.js producer sent in send order (orderly POP)."""
    from .test_fifo import orderly_group

    await cluster.create_topic(TOPIC)
    await orderly_group(cluster, "NodeFifoGroup")
    endpoint = f"127.0.0.1:{proxy.port}"
    await run_node(endpoint, tmp_path, "fifo", TOPIC, "24", "3")
    got = await run_node(endpoint, tmp_path, "receive", TOPIC, "24", "NodeFifoGroup")
    assert len(got) == 24 and all(m["attempt"] == 1 for m in got)
    by_group: dict[str, list[int]] = {}
    for m in got:
        by_group.setdefault(m["group"], []).append(int(m["body"].removeprefix("node-")))
    assert by_group == {f"g{g}": list(range(g, 24, 3)) for g in range(3)}

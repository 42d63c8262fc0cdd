"""`rmq fuzz`: the case generator, the finding detection, and short runs against our servers.

The live runs use a name server and a broker on 127.0.0.1 (port 0) in this process; each is
bounded by --seconds and a fail_after. A short run must find nothing, log no traceback, and
leave both servers answering valid clients.
"""

from __future__ import annotations

import logging
import struct
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from rmq.broker.controller import BrokerController
from rmq.client import ConsumeFromWhere, Message, Producer, PullConsumer
from rmq.dledger.node import DLedgerNode, NodeConfig
from rmq.fuzzing import cases as F
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.server import NamesrvServer
from rmq.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.errors import ProtocolError
from rmq.raft import messages as DL
from rmq.raft.core import RaftConfig
from rmq.remoting import RemotingClient
from rmq.tools import fuzz as tool
from rmq.tools.fuzz import FuzzOptions, fuzz
from tests.broker.cluster import broker_config
from tests.ports import free_ports

# -- the generator ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", F.KINDS)
@pytest.mark.parametrize("unsafe", [False, True])
def test_cases_are_reproducible_and_honest(kind: str, unsafe: bool) -> None:
    mutating = {s.code for s in (F.BROKER_CODES + F.NAMESRV_CODES + F.DLEDGER_CODES) if s.mutates}
    seen = set()
    for n in range(600):
        case = F.make_case(11, n, kind, opaque=1000 + n, unsafe=unsafe)
        assert case == F.make_case(11, n, kind, opaque=1000 + n, unsafe=unsafe)  # --replay sends these bytes
        seen.add(case.category)
        assert len(case.payload) <= 16 * 1024 * 1024
        if case.raw:
            assert case.answer == F.NONE
            continue
        assert case.opaque == 1000 + n
        if case.category != "unknown-code" and not unsafe:
            assert case.code not in mutating, case.describe()
        if case.answer == F.DUE:
            # an answer is owed only to a well-framed request rmq itself reads as one
            cmd = RemotingCommand.decode(case.payload[4:])
            assert not cmd.is_response and not cmd.is_oneway and cmd.opaque == case.opaque
            assert (cmd.code, cmd.ext_fields is not None) == (case.code, True)
    # properties cases need a code with a properties field: sends, which only --unsafe makes
    # (a DLedger member's fields are in its JSON bodies, broken there by the same categories)
    assert seen >= set(F.CATEGORY_NAMES) - {"properties"}


def test_long_polls_are_waited_for_or_optional() -> None:
    for n in range(3000):
        case = F.make_case(3, n, F.BROKER, opaque=n)
        if case.code != RequestCode.PULL_MESSAGE or case.answer != F.DUE:
            continue
        try:
            ext = RemotingCommand.decode(case.payload[4:]).ext_fields
            flag, suspend = int(ext.get("sysFlag", "0")), int(ext.get("suspendTimeoutMillis", "15000"))
        except (ProtocolError, ValueError):
            continue
        if flag & 2:
            assert 0 <= suspend <= 3000 and case.extra_wait >= suspend / 1000


def test_internal_error_remarks() -> None:
    assert F.internal_error(1, "TypeError: 'int' object is not iterable")
    assert F.internal_error(1, "java.lang.NullPointerException")
    assert not F.internal_error(1, "the header field 'topic' is missing in PullMessageRequestHeader")
    assert not F.internal_error(1, "org.apache.rocketmq.remoting.exception.RemotingCommandException: x is null")
    assert not F.internal_error(0, "ValueError: fine")


def test_cli_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        tool.main(["--target", "nowhere"])
    assert tool.main(["--target", "127.0.0.1:1", "--replay", "1:2"]) == 2  # --replay needs --kind
    assert tool.main(["--target", "127.0.0.1:1", "--seconds", "1", "--timeout", "0.5"]) == 2  # nothing listens


# -- finding detection, against servers broken on purpose ---------------------------------------


async def _misbehaving(behaviour: str, task_status: trio.TaskStatus[int]) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        try:
            while data := await stream.receive_some(65536):
                decoder.feed(data)
                for frame in decoder:
                    try:
                        req = RemotingCommand.decode(frame)
                    except ProtocolError:
                        return
                    if behaviour == "close":
                        return
                    if behaviour == "silent":
                        continue
                    resp = req.make_response(ResponseCode.SUCCESS)
                    if behaviour == "wrong-opaque":
                        resp.opaque = req.opaque ^ 0x5A5A
                    if behaviour == "garbage":
                        await stream.send_all(struct.pack(">i", 12) + b"\x00\x00\x00\x08notjson!")
                        continue
                    await stream.send_all(resp.encode())
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(handler, listeners)


@pytest.mark.parametrize(
    ("behaviour", "finding"),
    [("close", tool.CRASH), ("silent", tool.HANG), ("wrong-opaque", tool.BAD_ANSWER), ("garbage", tool.BAD_ANSWER)],
)
async def test_findings_are_reported(behaviour: str, finding: str) -> None:
    async with trio.open_nursery() as nursery:
        port = await nursery.start(_misbehaving, behaviour)
        options = FuzzOptions(
            host="127.0.0.1", port=port, seconds=3, cases=12, seed=5, kind=F.BROKER, timeout=0.3,
            categories=("valid",),
        )  # fmt: skip
        with trio.fail_after(30):
            report = await fuzz(options)
        nursery.cancel_scope.cancel()
    kinds = {f.kind for f in report.findings}
    assert finding in kinds, report.summary()
    f = next(f for f in report.findings if f.kind == finding)
    assert f"--replay 5:{f.case.number}" in report.replay_command(f.case)
    assert "--category valid" in report.replay_command(f.case)
    assert "findings:" in report.summary()


# -- our own servers ------------------------------------------------------------------------------


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[tuple[NamesrvServer, BrokerController]]:
    config = NamesrvConfig(listen_host="127.0.0.1", listen_port=0, kv_config_path=None)
    async with NamesrvServer(config) as namesrv, trio.open_nursery() as nursery:
        broker = BrokerController(broker_config(tmp_path / "store", namesrv.address))
        await nursery.start(broker.serve)
        yield namesrv, broker
        broker.shutdown()
        await broker.wait_stopped()
        nursery.cancel_scope.cancel()


def _server_bugs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("rmq.") and not r.name.startswith("rmq.client") and (r.exc_info or r.levelno >= 40)
    ]


async def test_short_runs_find_nothing_and_servers_keep_serving(
    servers: tuple[NamesrvServer, BrokerController], caplog: pytest.LogCaptureFixture
) -> None:
    namesrv, broker = servers
    caplog.set_level(logging.INFO)
    assert namesrv.port is not None and broker.port is not None
    runs = [
        # every code, state-changing ones included, on both
        FuzzOptions(host="127.0.0.1", port=namesrv.port, seconds=3, seed=101, unsafe=True),
        FuzzOptions(host="127.0.0.1", port=broker.port, seconds=4, seed=102, unsafe=True),
    ]
    reports = []
    with trio.fail_after(60):
        for options in runs:
            reports.append(await fuzz(options))
    assert [r.kind for r in reports] == [F.NAMESRV, F.BROKER]  # --kind auto
    for report in reports:
        assert report.cases > 200, report.summary()
        assert not report.findings and not report.internal_errors, report.summary()
        assert set(report.categories) >= set(F.CATEGORY_NAMES) - {"properties"}, report.summary()
    assert not _server_bugs(caplog)

    # the servers still serve well-behaved clients. The --unsafe run may have deleted routes on
    # the name server (DELETE_TOPIC_IN_NAMESRV of TBW102, say), as an admin may: create the
    # topic on the broker, whose next registration (done now) carries its changed topic table.
    with trio.fail_after(30):
        ext = {"topic": "FuzzAfter", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}
        async with RemotingClient() as client:
            created = await client.invoke(
                broker.address, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext), 5
            )
            assert created.code == ResponseCode.SUCCESS, created
            assert broker.registration is not None
            await broker.registration.register_all()
            route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "FuzzAfter"})
            assert (await client.invoke(namesrv.address, route, 5)).code == ResponseCode.SUCCESS
        async with Producer("fuzz-after-producer", namesrv=namesrv.address) as producer:
            result = await producer.send(Message("FuzzAfter", b"still here"))
            assert result.status.name == "SEND_OK"
        consumer = PullConsumer(
            "fuzz-after-consumer", namesrv=namesrv.address, consume_from_where=ConsumeFromWhere.FIRST_OFFSET
        )
        consumer.subscribe("FuzzAfter")
        async with consumer:
            await consumer.wait_for_assignment(timeout=10)
            received: list[bytes] = []
            while not received:
                received += [m.body for m in await consumer.poll(timeout=1)]
    assert received == [b"still here"]


async def test_a_dledger_group_fuzzed_finds_nothing_and_still_commits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """rmq fuzz (--kind auto finds a DLedger member) against each member of a running group
    (bare members, in this process):
    peers' messages broken every way, APPEND, GET and METADATA; then the group still elects and
    commits."""
    caplog.set_level(logging.INFO)
    peers = {f"n{k}": f"127.0.0.1:{free_ports()}" for k in range(3)}
    raft = RaftConfig(election_timeout_ms=600, heartbeat_interval_ms=200, push_timeout_ms=200)
    async with trio.open_nursery() as nursery:
        nodes = [
            await nursery.start(DLedgerNode(NodeConfig(k, peers, str(tmp_path), raft=raft, sync_flush=False)).serve)
            for k in peers
        ]

        async def leader() -> DLedgerNode:
            with trio.fail_after(20):
                while not (led := [n for n in nodes if n.core.is_leader]):
                    await trio.sleep(0.05)
            return led[0]

        await leader()
        for seed, node in enumerate(nodes, 201):
            assert node.port is not None
            options = FuzzOptions(host="127.0.0.1", port=node.port, seconds=2, seed=seed, unsafe=True)
            with trio.fail_after(30):
                report = await fuzz(options)
            assert report.kind == F.DLEDGER and report.cases > 100, report.summary()  # --kind auto
            assert not report.findings and not report.internal_errors, report.summary()
        led = await leader()
        async with RemotingClient() as client:
            append = RemotingCommand.request(DL.APPEND, body=b"x")
            with trio.fail_after(20):
                answer = await client.invoke(peers[led.config.self_id], append, 10)
        assert answer.code == ResponseCode.SUCCESS, answer
        nursery.cancel_scope.cancel()
    assert not _server_bugs(caplog)


async def test_replay_sends_the_same_case(servers: tuple[NamesrvServer, BrokerController]) -> None:
    namesrv, _ = servers
    target = f"127.0.0.1:{namesrv.port}"
    argv = [sys.executable, "-m", "rmq", "fuzz", "--target", target, "--kind", "namesrv", "--replay", "7:3"]
    with trio.fail_after(60):
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    expected = F.make_case(7, 3, F.NAMESRV, opaque=0)
    assert out.startswith(f"case 3 [{expected.category}]"), out
    assert "1 cases" in out and "findings: none" in out


def test_rmq_fuzz_is_a_subcommand() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rmq", "fuzz", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and "--replay" in done.stdout

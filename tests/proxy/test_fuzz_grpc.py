"""`rmq fuzz --grpc`: the case generator and the answer reader (sans-IO, against h2 itself), a
short run against a proxy in this process that must find nothing, log no bug and leak no
call, connection or client, and the proxy's guards the run relies on (idle connections,
answers the client leaves no window for)."""

from __future__ import annotations

import logging

import h2.config
import h2.connection
import h2.events
import hpack
import pytest
import trio

from rmq.fuzzing import grpc as G
from rmq.proxy import ProxyConfig, ProxyServer
from rmq.proxy import grpc as proxy_grpc
from rmq.tools import fuzz as tool
from rmq.tools.fuzz_grpc import QUERY_ROUTE, GrpcFuzzOptions, fuzz_grpc, methods_table
from tests.client.conftest import Cluster

from .conftest import FAST, run_client

METHODS = methods_table("rmq-fuzz-topic", "rmq-fuzz-group")


@pytest.mark.parametrize("unsafe", [False, True])
def test_cases_are_reproducible_and_honest(unsafe: bool) -> None:
    seen = set()
    safe = {m.path for m in METHODS.values() if m.safe}
    for n in range(500):
        case = G.make_case(7, n, METHODS, unsafe=unsafe)
        assert case == G.make_case(7, n, METHODS, unsafe=unsafe)  # --replay sends the same
        seen.add(case.category)
        if case.category != "preface":
            first = case.steps[0]
            assert isinstance(first, G.Send) and first.data.startswith(G.opening())
        if case.path and not unsafe:
            assert case.path in safe, case.describe()
        assert not (case.owed and not case.reads)
    assert seen == set(G.CATEGORY_NAMES)


def test_the_reader_reads_what_h2_answers() -> None:
    """A probe's bytes into h2's own server, its answer back through the Reader."""
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
    server.initiate_connection()
    steps = G.probe(QUERY_ROUTE, METHODS[QUERY_ROUTE].requests[0])
    events = []
    for step in steps:
        assert isinstance(step, G.Send | G.Data)
        data = step.data if isinstance(step, G.Send) else G.frame(G.DATA, G.END_STREAM, 1, step.data)
        events += server.receive_data(data)
    assert any(isinstance(e, h2.events.RequestReceived) for e in events)
    assert any(isinstance(e, h2.events.StreamEnded) for e in events)
    server.send_headers(1, [(":status", "200"), ("content-type", "application/grpc")])
    server.send_data(1, G.message(b"\x0a\x00"))
    server.send_headers(1, [("grpc-status", "0")], end_stream=True)
    reader = G.Reader()
    out = server.data_to_send()
    for i in range(0, len(out), 7):  # a few bytes at a time
        reader.feed(out[i : i + 7])
    assert not reader.errors and reader.settings_seen
    answer = reader.streams[1]
    assert answer.done and answer.trailer("grpc-status") == "0" and answer.messages() == [b"\x0a\x00"]
    bad = G.Reader()
    bad.feed(G.frame(G.DATA, 0, 0, b"x"))
    assert bad.errors == ["DATA on stream 0"]


async def test_a_short_run_finds_nothing_and_leaks_nothing(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    await cluster.create_topic("rmq-fuzz-topic", queues=2)
    config = ProxyConfig.from_mapping({"namesrvAddr": cluster.namesrv_addr, "grpcServerPort": 0, **FAST})
    async with ProxyServer(config, host="127.0.0.1") as proxy:
        options = GrpcFuzzOptions("127.0.0.1", proxy.port, seconds=8, seed=11, unsafe=True, timeout=5, concurrency=2)
        with trio.fail_after(90):
            report = await fuzz_grpc(options)
        assert report.cases > 60, report.summary()
        assert not report.findings and not report.internal_errors, report.summary()
        assert set(report.categories) == set(G.CATEGORY_NAMES), report.summary()
        assert report.statuses["OK"] and report.statuses["INVALID_ARGUMENT"] and report.statuses["UNIMPLEMENTED"]

        with trio.fail_after(10):  # what the run opened is gone: connections, calls, clients
            while proxy.grpc.connections or any(proxy.grpc.calls.values()):
                await trio.sleep(0.05)
        service = proxy.service
        assert not service.channels.clients and not service.channels._waiting and not service.settings
        assert not service.transactions.clients and not service.consumers.groups
        (route,) = await run_client(f"127.0.0.1:{proxy.port}", "query_route", "rmq-fuzz-topic", "g")
        assert route["code"] == 20000 and route["queues"] == 2  # the official client still served
    bugs = [r for r in caplog.records if r.name.startswith("rmq.proxy") and (r.exc_info or r.levelno >= 40)]
    assert not bugs, [r.getMessage() for r in bugs]


async def _misbehaving(behaviour: str, task_status: trio.TaskStatus[int]) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        async with stream:
            if behaviour == "close":
                return
            with trio.move_on_after(30):
                while await stream.receive_some(65536):  # silent: reads, answers nothing
                    pass

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(handler, listeners)


@pytest.mark.parametrize(("behaviour", "finding"), [("close", tool.CRASH), ("silent", tool.HANG)])
async def test_findings_are_reported(behaviour: str, finding: str) -> None:
    async with trio.open_nursery() as nursery:
        port = await nursery.start(_misbehaving, behaviour)
        options = GrpcFuzzOptions("127.0.0.1", port, cases=2, seed=5, timeout=0.5, categories=("valid",))
        with trio.fail_after(30):
            report = await fuzz_grpc(options)
        nursery.cancel_scope.cancel()
    assert finding in {f.kind for f in report.findings}, report.summary()
    f = report.findings[0]
    assert f"--grpc 127.0.0.1:{port}" in report.replay_command(f.case)
    assert "--category valid --replay 5:" in report.replay_command(f.case)


def test_cli() -> None:
    assert tool.main(["--grpc", "127.0.0.1:1", "--seconds", "1", "--timeout", "0.5"]) == 2  # nothing listens
    with pytest.raises(SystemExit):
        tool.main(["--grpc", "127.0.0.1:1", "--category", "framing"])  # the remoting port's category
    with pytest.raises(SystemExit):
        tool.main(["--target", "127.0.0.1:1", "--category", "protobuf"])
    with pytest.raises(SystemExit):
        tool.main(["--target", "127.0.0.1:1", "--grpc", "127.0.0.1:2"])


async def _opened(port: int) -> tuple[trio.SocketStream, G.Reader]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(G.opening())
    return stream, G.Reader()


async def test_an_idle_connection_is_closed(cluster: Cluster) -> None:
    """grpcClientIdleTimeMills: no call for that long, a GOAWAY and the connection closes."""
    values = {"namesrvAddr": cluster.namesrv_addr, "grpcServerPort": 0, "grpcClientIdleTimeMills": 300}
    async with ProxyServer(ProxyConfig.from_mapping(values), host="127.0.0.1") as proxy:
        stream, reader = await _opened(proxy.port)
        async with stream:
            start = trio.current_time()
            with trio.fail_after(10):
                while data := await stream.receive_some(65536):
                    reader.feed(data)
        assert reader.goaway is not None and 0.25 < trio.current_time() - start < 5
        with trio.fail_after(5):
            while proxy.grpc.connections:
                await trio.sleep(0.02)


async def test_an_answer_given_no_window_is_reset(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client whose SETTINGS leave the answer no window, and whose call has no deadline:
    the call is reset (CANCEL) after STALL_TIMEOUT instead of being held while it lives."""
    monkeypatch.setattr(proxy_grpc, "STALL_TIMEOUT", 0.5)
    values = {"namesrvAddr": cluster.namesrv_addr, "grpcServerPort": 0}
    async with ProxyServer(ProxyConfig.from_mapping(values), host="127.0.0.1") as proxy:
        stream, reader = await _opened(proxy.port)
        headers = [h for h in G.request_headers(QUERY_ROUTE, "stalled") if h[0] != b"grpc-timeout"]
        request = G.headers_frames(hpack.Encoder(), 1, headers) + G.frame(
            G.DATA, G.END_STREAM, 1, G.message(METHODS[QUERY_ROUTE].requests[0])
        )
        async with stream:
            await stream.send_all(G.settings((4, 0)) + request)
            with trio.fail_after(10):
                while not reader.streams.get(1, G.Answer()).done:
                    reader.feed(await stream.receive_some(65536))
        assert reader.streams[1].reset == 8  # CANCEL
        assert reader.streams[1].headers[0][0] == (":status", "200")
        with trio.fail_after(5):
            while any(proxy.grpc.calls.values()):
                await trio.sleep(0.02)

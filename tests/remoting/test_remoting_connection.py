"""Connection semantics over memory streams: invoke, opaques, timeouts, closing, both directions."""

from __future__ import annotations

import pytest
import trio
import trio.lowlevel
import trio.testing

from rmq.protocol import (
    RPC_ONEWAY,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    encode_frame,
)
from rmq.remoting import (
    Connection,
    Dispatcher,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
    RequestContext,
)
from rmq.remoting.stages.codec import CommandStream
from rmq.remoting.testing import echo, memory_connection_pair, raw_peer


def echo_dispatcher(**kwargs: object) -> Dispatcher:
    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, echo, **kwargs)  # type: ignore[arg-type]
    return d


async def test_invoke_roundtrip_and_opaques() -> None:
    async with memory_connection_pair(echo_dispatcher()) as (client, server):
        for i in range(3):
            req = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": i}, b"body")
            resp = await client.invoke(req, 1.0)
            assert req.opaque == resp.opaque == i
            assert resp.is_response and resp.code == ResponseCode.SUCCESS
            assert resp.ext_fields == {"n": str(i)} and resp.body == b"body"
        assert client.statistics().pending == 0
        assert server.remote_address == "memory:client"


async def test_opaques_wrap_to_zero() -> None:
    async with memory_connection_pair(echo_dispatcher()) as (client, _):
        client._next_opaque = 0x7FFFFFFE
        opaques = []
        for _ in range(3):
            req = RemotingCommand.request(RequestCode.SEND_MESSAGE)
            await client.invoke(req, 1.0)
            opaques.append(req.opaque)
        assert opaques == [0x7FFFFFFE, 0x7FFFFFFF, 0]


async def test_many_requests_in_flight_answered_out_of_order(autojump_clock: trio.testing.MockClock) -> None:
    async def slow_echo(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        await trio.sleep(int(request.ext_fields["delay"]))
        return request.make_response(ext_fields={"n": request.ext_fields["n"]})

    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, slow_echo, concurrency=500)
    results: dict[int, str] = {}
    async with memory_connection_pair(d) as (client, _):

        async def one(n: int) -> None:
            req = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": n, "delay": (n * 7) % 13})
            results[n] = (await client.invoke(req, 30.0)).ext_fields["n"]

        async with trio.open_nursery() as nursery:
            for n in range(300):
                nursery.start_soon(one, n)
        assert client.statistics().pending == 0
    assert results == {n: str(n) for n in range(300)}


async def test_timeout_names_address_code_and_timeout(autojump_clock: trio.testing.MockClock) -> None:
    async def never(ctx: RequestContext, request: RemotingCommand) -> None:
        return None

    d = Dispatcher()
    d.register(RequestCode.PULL_MESSAGE, never)
    async with memory_connection_pair(d) as (client, _):
        start = trio.current_time()
        with pytest.raises(RemotingTimeoutError) as info:
            await client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE), 2.5)
        assert trio.current_time() - start == pytest.approx(2.5)
        err = info.value
        assert err.address == "memory:server"
        assert err.code == RequestCode.PULL_MESSAGE
        assert err.timeout == 2.5
        text = str(err)
        assert "memory:server" in text and "PULL_MESSAGE(11)" in text and "2500 ms" in text
        assert client.statistics().pending == 0


async def test_timeouts_of_different_lengths(autojump_clock: trio.testing.MockClock) -> None:
    async def never(ctx: RequestContext, request: RemotingCommand) -> None:
        return None

    d = Dispatcher()
    d.register(RequestCode.PULL_MESSAGE, never)
    ends: dict[float, float] = {}
    async with memory_connection_pair(d) as (client, _):
        start = trio.current_time()

        async def one(timeout: float) -> None:
            with pytest.raises(RemotingTimeoutError):
                await client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE), timeout)
            ends[timeout] = trio.current_time() - start

        async with trio.open_nursery() as nursery:
            for timeout in (30.0, 10.0, 20.0, 1.0, 5.0):  # later ones expire sooner
                nursery.start_soon(one, timeout)
                await trio.lowlevel.checkpoint()
    assert ends == {t: pytest.approx(t) for t in (30.0, 10.0, 20.0, 1.0, 5.0)}


class _TimerSteps(trio.abc.Instrument):
    """Counts the steps of connections' timer tasks."""

    def __init__(self) -> None:
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task.name.endswith("_timer_loop"):
            self.steps += 1


async def test_timer_sleeps_past_answered_requests(autojump_clock: trio.testing.MockClock) -> None:
    # Answered requests leave their deadlines behind; the timer must not wake for each.
    steps = _TimerSteps()
    trio.lowlevel.add_instrument(steps)
    try:
        async with memory_connection_pair(echo_dispatcher()) as (client, _):
            for _ in range(200):
                await client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE), 3.0)
                await trio.sleep(0.01)
            await trio.sleep(5)
    finally:
        trio.lowlevel.remove_instrument(steps)
    assert steps.steps < 10


async def _never(ctx: RequestContext, request: RemotingCommand) -> None:
    return None


async def test_short_timeout_behind_answered_long_ones(autojump_clock: trio.testing.MockClock) -> None:
    d = echo_dispatcher()
    d.register(RequestCode.PULL_MESSAGE, _never)
    async with memory_connection_pair(d) as (client, _):
        for _ in range(3):
            await client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE), 30.0)
        start = trio.current_time()
        with pytest.raises(RemotingTimeoutError):
            await client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE), 1.0)
        assert trio.current_time() - start == pytest.approx(1.0)
        assert client.statistics().pending == 0


async def test_late_response_is_dropped(autojump_clock: trio.testing.MockClock) -> None:
    async def late(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        await trio.sleep(5)
        return request.make_response()

    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, late)
    async with memory_connection_pair(d) as (client, _):
        with pytest.raises(RemotingTimeoutError):
            await client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE), 1.0)
        await trio.sleep(10)  # the response arrives and finds no one waiting
        assert not client.closed
        d2 = await client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE), 10.0)
        assert d2.code == ResponseCode.SUCCESS


async def test_cancelled_invoke_leaves_nothing_behind(autojump_clock: trio.testing.MockClock) -> None:
    async def late(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        await trio.sleep(5)
        return request.make_response()

    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, late)
    async with memory_connection_pair(d) as (client, _):
        with trio.move_on_after(1):
            await client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE), 60.0)
        assert client.statistics().pending == 0
        await trio.sleep(10)
        assert not client.closed


async def test_pending_invokes_fail_when_the_connection_dies(autojump_clock: trio.testing.MockClock) -> None:
    async def never(ctx: RequestContext, request: RemotingCommand) -> None:
        return None

    d = Dispatcher()
    d.register(RequestCode.PULL_MESSAGE, never)
    errors: list[RemotingConnectError] = []
    async with memory_connection_pair(d) as (client, server):

        async def waiter() -> None:
            try:
                await client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE), 60.0)
            except RemotingConnectError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(waiter)
            await trio.sleep(1)
            server.close("test")
        await client.wait_closed()
        assert client.close_reason == "closed by peer"
        with pytest.raises(RemotingSendRequestError) as info:
            await client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE), 1.0)
        assert "memory:server" in str(info.value)
        with pytest.raises(RemotingSendRequestError):
            await client.invoke_oneway(RemotingCommand.request(RequestCode.PULL_MESSAGE))
    assert len(errors) == 5
    assert all(e.address == "memory:server" and "closed by peer" in str(e) for e in errors)


async def test_invoke_nowait_sends_at_once_and_keeps_the_answer(autojump_clock: trio.testing.MockClock) -> None:
    """A request sent with invoke_nowait is on the wire before the caller waits; its answer
    waits in the Sent, in any order with other requests, until taken."""

    async def late(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        await trio.sleep(float(request.body))
        return request.make_response(remark=f"answer {request.body.decode()}")

    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, late, concurrency=4)
    async with memory_connection_pair(d) as (client, _):
        first = client.invoke_nowait(RemotingCommand.request(RequestCode.SEND_MESSAGE, body=b"2"), 10.0)
        second = client.invoke_nowait(RemotingCommand.request(RequestCode.SEND_MESSAGE, body=b"1"), 10.0)
        assert first is not None and second is not None
        assert client.statistics().pending == 2
        await trio.sleep(5)  # both answered meanwhile, nobody waiting
        start = trio.current_time()
        assert (await second.wait()).remark == "answer 1"
        assert (await first.wait()).remark == "answer 2"
        assert trio.current_time() == start
        assert client.statistics().pending == 0


async def test_on_answer_runs_in_the_reader_before_the_caller_wakes() -> None:
    """`on_answer` sees the response as the reader takes it, before the waiting task runs
    again; the slot, which lingers in the deadline heap until its timeout, lets go of it."""
    seen: list[tuple[int, bool]] = []
    woken = False

    async with memory_connection_pair(echo_dispatcher()) as (client, _):

        def on_answer(response: RemotingCommand) -> None:
            seen.append((response.opaque, woken))

        request = RemotingCommand.request(RequestCode.SEND_MESSAGE, body=b"x")
        response = await client.invoke(request, 10.0, on_answer)
        woken = True
        assert seen == [(request.opaque, False)] and response.body == b"x"
        assert all(slot.on_answer is None for _, _, slot in client._deadlines)


async def test_an_on_answer_that_raises_leaves_the_connection_serving(caplog: pytest.LogCaptureFixture) -> None:
    def broken(response: RemotingCommand) -> None:
        raise ValueError("a bug in the caller")

    async with memory_connection_pair(echo_dispatcher()) as (client, _):
        response = await client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE, body=b"1"), 10.0, broken)
        assert response.body == b"1"
        again = await client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE, body=b"2"), 10.0)
        assert again.body == b"2" and not client.closed
    assert "on_answer" in caplog.text


async def test_an_answer_taken_late_is_not_kept_by_its_slot(autojump_clock: trio.testing.MockClock) -> None:
    async with memory_connection_pair(echo_dispatcher()) as (client, _):
        sent = client.invoke_nowait(RemotingCommand.request(RequestCode.SEND_MESSAGE, body=b"big"), 10.0)
        assert sent is not None
        await trio.sleep(1)  # answered, nobody waiting yet
        assert (await sent.wait()).body == b"big"
        assert all(slot.result is None for _, _, slot in client._deadlines)


async def test_invoke_nowait_times_out_and_forgets(autojump_clock: trio.testing.MockClock) -> None:
    d = Dispatcher()
    d.register(RequestCode.PULL_MESSAGE, _never)
    d.register(RequestCode.SEND_MESSAGE, echo)
    async with memory_connection_pair(d) as (client, _):
        sent = client.invoke_nowait(RemotingCommand.request(RequestCode.PULL_MESSAGE), 2.0)
        assert sent is not None
        start = trio.current_time()
        with pytest.raises(RemotingTimeoutError):
            await sent.wait()
        assert trio.current_time() - start == pytest.approx(2.0)
        forgotten = client.invoke_nowait(RemotingCommand.request(RequestCode.SEND_MESSAGE), 10.0)
        assert forgotten is not None
        forgotten.forget()  # its answer is dropped when it comes
        assert client.statistics().pending == 0
        await trio.sleep(1)
        assert not client.closed
        assert (await client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE), 1.0)).code == 0


async def test_invoke_nowait_sends_nothing_when_it_would_wait(autojump_clock: trio.testing.MockClock) -> None:
    d = Dispatcher()
    d.register(RequestCode.PULL_MESSAGE, _never)
    async with memory_connection_pair(d, max_pending=2) as (client, server):
        for _ in range(2):
            assert client.invoke_nowait(RemotingCommand.request(RequestCode.PULL_MESSAGE), 10.0) is not None
        assert client.invoke_nowait(RemotingCommand.request(RequestCode.PULL_MESSAGE), 10.0) is None
        assert client.statistics().pending == 2
        server.close("test")
        await client.wait_closed()
        assert client.invoke_nowait(RemotingCommand.request(RequestCode.PULL_MESSAGE), 10.0) is None


async def test_invoke_before_run_is_refused() -> None:
    a, _ = trio.testing.memory_stream_pair()
    conn = Connection(CommandStream(a), remote_address="memory:x")
    with pytest.raises(RemotingSendRequestError, match="not running"):
        await conn.invoke(RemotingCommand.request(RequestCode.HEART_BEAT), 1.0)
    await conn.aclose()
    assert conn.closed


async def test_oneway_is_flagged_and_never_answered(autojump_clock: trio.testing.MockClock) -> None:
    seen: list[RemotingCommand] = []

    async def record(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        seen.append(request)
        return request.make_response()  # must not be sent for a oneway request

    d = Dispatcher()
    d.register(RequestCode.UPDATE_CONSUMER_OFFSET, record)
    async with raw_peer(d) as (peer, conn):
        # drive a Connection-side oneway through the peer, then a raw oneway at the connection
        await conn.invoke_oneway(RemotingCommand.request(RequestCode.HEART_BEAT, {"a": 1}))
        (got,) = await peer.receive_batch()
        assert got.flag & RPC_ONEWAY and got.code == RequestCode.HEART_BEAT
        await peer.send(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, oneway=True))
        with trio.move_on_after(5) as scope:
            await peer.receive_batch()
        assert scope.cancelled_caught
    assert len(seen) == 1


async def test_requests_in_both_directions() -> None:
    """Server-initiated requests: the server side's processor asks the client back on the
    same connection before answering."""

    async def check_state(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ext_fields={"state": "COMMIT"})

    async def end_tx(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        back = await ctx.connection.invoke(RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE), 1.0)
        return request.make_response(ext_fields={"checked": back.ext_fields["state"]})

    server_d = Dispatcher()
    server_d.register(RequestCode.END_TRANSACTION, end_tx)
    client_d = Dispatcher()
    client_d.register(RequestCode.CHECK_TRANSACTION_STATE, check_state)
    async with memory_connection_pair(server_d, client_d) as (client, server):
        resp = await client.invoke(RemotingCommand.request(RequestCode.END_TRANSACTION), 1.0)
        assert resp.ext_fields == {"checked": "COMMIT"}
        resp = await server.invoke(RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE), 1.0)
        assert resp.ext_fields == {"state": "COMMIT"}


async def test_too_many_pending(autojump_clock: trio.testing.MockClock) -> None:
    async def never(ctx: RequestContext, request: RemotingCommand) -> None:
        return None

    d = Dispatcher()
    d.register(RequestCode.PULL_MESSAGE, never)
    async with memory_connection_pair(d, max_pending=3) as (client, _), trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(client.invoke, RemotingCommand.request(RequestCode.PULL_MESSAGE), 10.0)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(RemotingTooMuchRequestError) as info:
            await client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE), 10.0)
        assert info.value.address == "memory:server"
        nursery.cancel_scope.cancel()


async def test_drain_finishes_in_flight_requests(autojump_clock: trio.testing.MockClock) -> None:
    async def slow(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        await trio.sleep(3)
        return request.make_response(ext_fields={"done": "yes"})

    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, slow)
    async with memory_connection_pair(d) as (client, server):
        async with trio.open_nursery() as nursery:
            results: list[RemotingCommand] = []

            async def call() -> None:
                results.append(await client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE), 10.0))

            nursery.start_soon(call)
            await trio.sleep(1)
            server.drain()
        await server.wait_closed()
        assert server.close_reason == "drained"
        assert results[0].ext_fields == {"done": "yes"}


async def test_protocol_error_closes_the_connection() -> None:
    left, right = trio.testing.memory_stream_pair()
    conn = Connection(CommandStream(right, max_frame_size=1024), echo_dispatcher(), remote_address="memory:bad")
    await left.send_all(encode_frame(0, b"{}", b"x" * 5000))
    with trio.fail_after(5):
        await conn.run()  # returns by itself
    assert conn.close_reason is not None and conn.close_reason.startswith("protocol error")
    assert await left.receive_some() == b""  # the stream was closed


async def test_send_response_later() -> None:
    held: list[tuple[RequestContext, RemotingCommand]] = []

    async def hold(ctx: RequestContext, request: RemotingCommand) -> None:
        held.append((ctx, request))  # answer later, from elsewhere (long polling)

    d = Dispatcher()
    d.register(RequestCode.PULL_MESSAGE, hold)
    async with memory_connection_pair(d) as (client, _):
        async with trio.open_nursery() as nursery:
            results: list[RemotingCommand] = []

            async def call() -> None:
                results.append(await client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE), 5.0))

            nursery.start_soon(call)
            while not held:
                await trio.sleep(0.01)
            ctx, request = held[0]
            await ctx.connection.send_response(request, RemotingCommand(ResponseCode.PULL_NOT_FOUND, remark="none"))
        assert results[0].code == ResponseCode.PULL_NOT_FOUND and results[0].opaque == request.opaque


async def test_a_burst_of_answers_wakes_callers_in_steps() -> None:
    """Twenty answers that arrive in one read are handed out eight at a time, with a yield
    between: the first callers run (and may send again) before the reader has handed out the
    whole burst, rather than after it."""
    async with raw_peer() as (peer, conn):
        seen: list[int] = []

        async def one(n: int) -> None:
            await conn.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": n}), 10.0)
            seen.append(conn.statistics().pending)

        async with trio.open_nursery() as nursery:
            for n in range(20):
                nursery.start_soon(one, n)
            requests: list[RemotingCommand] = []
            while len(requests) < 20:
                requests += await peer.receive_batch()
            await peer.send_frames([r.make_response().encode() for r in requests])
        assert len(seen) == 20
        # Trio reverses a run batch at random, so the reader may hand out the second eight
        # before the first eight callers run; either way those eight ran while answers were
        # still unread (12 or 4 of them). Handed out all at once, every caller would see 0.
        assert sum(1 for unread in seen if unread) >= 8

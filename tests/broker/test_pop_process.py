"""POP across SIGKILL: a broker process killed between a pop and its ack, right after acks
(also while they race the kill), and while its revive service moves what was not acked to
the retry topic. After the restart nothing acked comes back, nothing un-acked is lost and
nothing comes back before its invisible time is over (docs/pop.md, "Restarts").

A SIGKILL loses what the process held in memory, not what it wrote: consumerOffset.json
lags the pops by up to 5 s (its write delay), the revive progress beside it too, so every
kill here lands inside that window."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from rmq.protocol import ResponseCode
from rmq.protocol.pop import pop_retry_topic
from rmq.remoting import RemotingError

from .pop_process import GROUP, TOPIC, Delivery, PopBroker, pop_broker

pytestmark = pytest.mark.slow  # each starts a broker process, some twice; 5 to 15 s each

INVISIBLE_MS = 3000
# how long after its invisible time a message may take to come back: the revive round
# (reviveInterval 1 s) and a pop's poll
BACK_S = 8.0


def numbers(deliveries: list[Delivery]) -> list[int]:
    return sorted(d.n for d in deliveries)


async def nothing_more(pb: PopBroker) -> None:
    """Nothing comes back once everything delivered was acked (one invisible time and a
    revive round later)."""
    late = await pb.pop_for(INVISIBLE_MS / 1000 + 2, invisible_ms=INVISIBLE_MS)
    assert late == [], numbers(late)


async def test_killed_between_pop_and_ack_the_messages_come_back(tmp_path: Path) -> None:
    async with pop_broker(tmp_path, flush="ASYNC_FLUSH") as pb:
        sent = await pb.send_many(40)
        got = await pb.pop_all(40, invisible_ms=INVISIBLE_MS)
        assert numbers(got) == sent
        popped_at = trio.current_time()
        await pb.kill_and_restart()
        early = await pb.pop(invisible_ms=INVISIBLE_MS)  # not handed out again while invisible
        assert early == [] or trio.current_time() - popped_at > INVISIBLE_MS / 1000, numbers(early)
        back = await pb.pop_for(INVISIBLE_MS / 1000 + BACK_S, invisible_ms=60_000, until=set(sent))
        assert numbers(back) == sent, pb.log()  # each once, through the retry topic
        assert all(d.msg.reconsume_times == 1 and d.handle.retry == "1" for d in back)
        await pb.ack_all(back)
        await nothing_more(pb)


async def test_acked_before_the_kill_never_comes_back(tmp_path: Path) -> None:
    async with pop_broker(tmp_path, flush="SYNC_FLUSH") as pb:
        await pb.send_many(40)
        got = await pb.pop_all(40, invisible_ms=INVISIBLE_MS)
        acked = [d for d in got if d.n % 2 == 0]
        await pb.ack_all(acked)
        await pb.kill_and_restart()  # right after the last ack was answered
        unacked = {d.n for d in got} - {d.n for d in acked}
        back = await pb.pop_for(INVISIBLE_MS / 1000 + BACK_S, invisible_ms=60_000, until=unacked)
        assert numbers(back) == sorted(unacked), pb.log()
        await pb.ack_all(back)
        await nothing_more(pb)


@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
async def test_acks_racing_the_kill(tmp_path: Path, flush: str) -> None:
    """Four tasks ack 200 messages; the broker is killed once 60 acks were answered, with
    others on the wire. No message whose ack was answered comes back; every one whose ack
    was never sent does; one whose ack was sent but not answered may go either way. A
    SIGKILL leaves the page cache: ASYNC_FLUSH keeps every ack written too."""
    async with pop_broker(tmp_path, flush=flush) as pb:
        await pb.send_many(200)
        got = await pb.pop_all(200, invisible_ms=INVISIBLE_MS)
        answered: set[int] = set()
        attempted: set[int] = set()
        enough = trio.Event()

        async def acker(share: list[Delivery]) -> None:
            for d in share:
                attempted.add(d.n)
                try:
                    r = await pb.ack(d)
                except RemotingError:
                    return  # the broker died under it
                assert r.code == ResponseCode.SUCCESS, r.remark
                answered.add(d.n)
                if len(answered) >= 60:
                    enough.set()

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for i in range(4):
                    nursery.start_soon(acker, got[i::4])
                await enough.wait()
                await pb.kill()
        assert 60 <= len(answered) < 200
        await pb.restart()
        never_acked = {d.n for d in got} - attempted
        back = await pb.pop_for(INVISIBLE_MS / 1000 + BACK_S, invisible_ms=60_000, until=never_acked)
        assert not answered & set(numbers(back)), (sorted(answered & set(numbers(back))), pb.log())
        assert never_acked <= set(numbers(back)), pb.log()
        assert len(back) == len(set(numbers(back)))  # no message twice
        await pb.ack_all(back)
        await nothing_more(pb)


async def test_killed_while_reviving_loses_nothing(tmp_path: Path) -> None:
    """800 popped, every third acked; the broker is killed as soon as the revive service has
    moved some, not all, of the rest to the retry topic (533 re-puts, each synced: a few
    hundred ms). After the restart each un-acked message comes back exactly once (the
    restart finds what was revived marked), no acked one at all."""
    invisible_ms = 6000  # the acks must all be in before the revive begins
    async with pop_broker(tmp_path, flush="SYNC_FLUSH") as pb:
        await pb.send_many(800)
        got = await pb.pop_all(800, invisible_ms=invisible_ms)
        acked = [d for d in got if d.n % 3 == 0]
        with trio.fail_after(invisible_ms / 2000):
            async with trio.open_nursery() as nursery:
                for i in range(4):
                    nursery.start_soon(pb.ack_all, acked[i::4])
        unacked = {d.n for d in got} - {d.n for d in acked}
        retry = pop_retry_topic(TOPIC, GROUP)
        with trio.fail_after(invisible_ms / 1000 + BACK_S):
            while not (moved := await pb.max_offset(retry)):
                await trio.sleep(0.002)
        await pb.kill()
        assert moved < len(unacked), "the revive was over before the kill"
        await pb.restart()
        back = await pb.pop_for(BACK_S, invisible_ms=60_000, until=unacked)
        assert numbers(back) == sorted(unacked), pb.log()
        await pb.ack_all(back)
        await nothing_more(pb)


async def test_killed_right_after_the_first_revive(tmp_path: Path) -> None:
    """The revive made the retry topic and moved the message there; the kill comes before
    topics.json was written (its write delay is 0.1 s): the restart must still serve it."""
    async with pop_broker(tmp_path, flush="SYNC_FLUSH") as pb:
        await pb.send_many(1)
        await pb.pop_all(1, invisible_ms=1000)
        with trio.fail_after(1 + BACK_S):
            while not await pb.max_offset(pop_retry_topic(TOPIC, GROUP)):
                await trio.sleep(0.002)
        await pb.kill_and_restart()
        back = await pb.pop_for(BACK_S, invisible_ms=60_000, until={0})
        assert numbers(back) == [0], pb.log()
        await pb.ack_all(back)
        await nothing_more(pb)


async def test_an_acked_retry_message_never_comes_back(tmp_path: Path) -> None:
    """Revived into the retry topic, popped from there and acked, then the kill: the
    restart reads the first pop's checkpoint again (its progress lagged) and must find the
    messages revived."""
    async with pop_broker(tmp_path, flush="SYNC_FLUSH") as pb:
        sent = await pb.send_many(10)
        await pb.pop_all(10, invisible_ms=1000)
        retried = await pb.pop_for(1 + BACK_S, invisible_ms=60_000, until=set(sent))
        assert numbers(retried) == sent and all(d.handle.retry == "1" for d in retried)
        await pb.ack_all(retried)
        await pb.kill_and_restart()
        again = await pb.pop_for(1 + BACK_S, invisible_ms=60_000)
        assert numbers(again) == [], pb.log()

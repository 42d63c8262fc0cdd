"""mqadmin queryMsgById after the message: where it stands with each group of its topic
(MessageTrack), and its resend options -g/-d (consume directly) and -s true (send again)."""

from __future__ import annotations

import re

import trio

from rmq.client import ConsumeFromWhere, Message, MessageExt, Producer, PullConsumer, PushConsumer
from rmq.client.admin import MQAdmin

from .test_admin import FAST, LIMIT, Servers, admin, create_topic, servers, wait_for

__all__ = ["servers"]  # the fixture, imported for pytest


def tracks(out: str) -> dict[str, tuple[str, str]]:
    """group → (trackType, exceptionDesc) from the MessageTrack lines."""
    found = re.findall(r"MessageTrack \[consumerGroup=(\S+), trackType=(\w+), exceptionDesc=(.*?)\]", out)
    return {group: (kind, desc) for group, kind, desc in found}


async def test_message_tracks_and_resend(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Track", queues=1)
    got: list[MessageExt] = []

    async def handler(msg: MessageExt) -> None:
        got.append(msg)

    async def skip(msg: MessageExt) -> None:
        pass

    wants_t = PushConsumer("cg_t", s.ns, handler=handler, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST)
    wants_t.subscribe("Track", "T")
    wants_other = PushConsumer("cg_other", s.ns, handler=skip, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST)
    wants_other.subscribe("Track", "Other")
    puller = PullConsumer("cg_pull", s.ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    puller.subscribe("Track")
    async with MQAdmin(s.ns) as mq_admin, Producer("pg_track", s.ns) as producer:
        async with wants_t, wants_other, puller:
            sent = await producer.send(Message("Track", b"tracked", tags="T"))
            with trio.fail_after(LIMIT):
                while not got:
                    await trio.sleep(0.05)

            async def both_past_it() -> bool:  # push consumers commit every 0.2 s
                for group in ("cg_t", "cg_other"):
                    try:
                        stats = await mq_admin.consume_stats(group, "Track")
                    except Exception:
                        return False
                    if sum(o.consumer_offset for o in stats.offsets.values()) < 1:
                        return False
                return True

            await wait_for(both_past_it)
            r = await admin(s, "queryMsgById", "-i", sent.offset_msg_id)
            assert r.code == 0, r.err
            assert r.lines[0].startswith("OffsetID:")  # the message first, as before
            assert tracks(r.out) == {
                "cg_t": ("CONSUMED", "null"),
                "cg_other": ("CONSUMED_BUT_FILTERED", "null"),  # its subscription leaves tag T out
                "cg_pull": ("PULL", "null"),  # a pull consumer keeps its own offsets
            }

            # -g/-d: the live client consumes the message once more
            client_id = wants_t.instance.client_id
            r = await admin(s, "queryMsgById", "-i", sent.offset_msg_id, "-g", "cg_t", "-d", client_id)
            assert r.code == 0, r.err
            assert re.fullmatch(
                r"ConsumeMessageDirectlyResult \[order=false, autoCommit=true, consumeResult=CR_SUCCESS, "
                r"remark=\S+, spentTimeMills=\d+\]",
                r.lines[0],
            ), r.out
            with trio.fail_after(LIMIT):
                while len(got) < 2:
                    await trio.sleep(0.05)
            assert got[-1].body == b"tracked"

        # the push groups went offline
        r = await admin(s, "queryMsgById", "-i", sent.offset_msg_id)
        assert r.code == 0, r.err
        kind, desc = tracks(r.out)["cg_t"]
        assert kind == "NOT_ONLINE" and desc.startswith("CODE:206 DESC:"), (kind, desc)

        # -s true: sent again to its topic, as a new message with the same body and tag
        r = await admin(s, "queryMsgById", "-i", sent.offset_msg_id, "-s", "true")
        assert r.code == 0, r.err
        assert r.lines[0] == f"prepare resend msg. originalMsgId={sent.offset_msg_id}"
        assert re.match(r"SendResult \[sendStatus=SEND_OK, msgId=\S+, offsetMsgId=(\S+), ", r.lines[1]), r.out
        again = await mq_admin.view_message(re.search(r"offsetMsgId=([0-9A-F]+)", r.lines[1]).group(1))  # type: ignore[union-attr]
        assert (again.topic, again.body, again.tags) == ("Track", b"tracked", "T")
        assert again.queue_offset == 1

"""mqadmin's consumeMessage: pull a topic's messages (a queue's with -b and -i, from an
offset with -o, between two times with -s and -e) and print them as Java's tool does, at
most -c of them. It reads as a tool (TOOLS_CONSUMER, or -g) and commits nothing."""

from __future__ import annotations

from rmq.admin import AdminError, consume
from rmq.admin.common import now_ms, parse_timestamp
from rmq.client import MessageQueue
from rmq.client.admin import MQAdmin
from rmq.client.api import PullStatus
from rmq.protocol.constants import TOOLS_CONSUMER_GROUP

from ..quickstart import format_message_ext
from .options import Args, Commands, Parser
from .output import Out


async def _print_range(admin: MQAdmin, r: consume.QueueRange, group: str, out: Out) -> None:
    """ConsumeMessageCommand.pullMessageByQueue: each answer as it comes."""
    async for result in consume.pulls(admin, r, group):
        if result.status == PullStatus.FOUND:
            print("Consume ok", file=out)
            for msg in result.messages:
                body = msg.body.decode("utf-8", "replace")
                print(f"MSGID: {msg.msg_id} {format_message_ext(msg, r.mq.broker_name)} BODY: {body}", file=out)
        elif result.status == PullStatus.NO_MATCHED_MSG:
            print(
                f"{r.mq} no matched msg. status={result.status}, offset={result.next_begin_offset}",
                file=out,
            )
        else:
            status, offset = result.status, result.next_begin_offset
            print(f"{r.mq} print msg finished. status={status}, offset={offset}", file=out)


def _times(args: Args) -> tuple[int, int]:
    """(begin, end) in ms, 0 when not given; Java's checks, with its words."""
    now = now_ms()
    begin = parse_timestamp(args.begin, now) if args.begin else 0
    end = parse_timestamp(args.end, now) if args.end else 0
    if begin > now:
        raise AdminError("Please set the beginTimestamp before now!")
    if end > now:
        raise AdminError("Please set the endTimestamp before now!")
    if args.end and begin > end:
        raise AdminError("Please make sure that the beginTimestamp is less than or equal to the endTimestamp")
    return begin, end


async def consume_message(admin: MQAdmin, args: Args, out: Out) -> int:
    if args.count <= 0:
        raise AdminError("Please input a positive messageNumber!")
    if args.queue_id is not None and not args.broker_name:
        raise AdminError("Please set the brokerName before queueId!")
    if args.offset is not None and args.queue_id is None:
        raise AdminError("Please set queueId before offset!")
    begin, end = _times(args)
    group = args.group.strip() if args.group else TOOLS_CONSUMER_GROUP
    topic = args.topic.strip()
    if args.queue_id is None:  # every queue of the topic, the oldest first, -c in all
        left = args.count
        for r in await consume.topic_ranges(admin, topic, begin, end):
            if left <= 0:
                break
            if r.last - r.first > left:
                print(f"The older {left} message of the {r.mq.queue_id} queue will be provided", file=out)
                r = consume.QueueRange(r.mq, r.addr, r.first, r.first + left - 1)
                left = 0
            else:
                left -= r.last - r.first
            await _print_range(admin, r, group, out)
        return 0
    mq = MessageQueue(topic, args.broker_name.strip(), args.queue_id)
    r = await consume.queue_range(admin, mq, begin, end)
    offset = args.offset or 0
    if offset > r.last:
        print(f"{mq} no matched msg, offset={offset}", file=out)
        return 0
    first = max(r.first, offset)
    r = consume.QueueRange(mq, r.addr, first, r.last)
    if r.last - r.first > args.count:
        print(f"The oldler {args.count} message will be provided", file=out)  # sic, Java's words
        r = consume.QueueRange(mq, r.addr, r.first, r.first + args.count - 1)
    await _print_range(admin, r, group, out)
    return 0


def _consume_args(p: Parser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-b", "--brokerName", dest="broker_name", help="broker name")
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, help="queue id")
    p.add_argument("-o", "--offset", type=int, help="queue offset")
    p.add_argument("-g", "--consumerGroup", dest="group", help="consumer group name (TOOLS_CONSUMER)")
    p.add_argument("-s", "--beginTimestamp", dest="begin", help="begin: ms, now or yyyy-MM-dd#HH:mm:ss:SSS")
    p.add_argument("-e", "--endTimestamp", dest="end", help="end: ms, now or yyyy-MM-dd#HH:mm:ss:SSS")
    p.add_argument("-c", "--MessageNumber", dest="count", type=int, default=128, help="messages at most (128)")


COMMANDS: Commands = {
    "consumeMessage": ("pull and print a topic's or a queue's messages", consume_message, _consume_args),
}

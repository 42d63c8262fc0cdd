"""mqadmin's message commands: queryMsgByKey, queryMsgById, queryMsgByUniqueKey,
queryMsgByOffset, printMsg, printMsgByQueue, queryCq, queryMsgTraceById, sendMessage, and
ours for dead letters, dlqList and dlqResend."""

from __future__ import annotations

import json
from collections import Counter
from contextlib import aclosing
from typing import Any

from rmq.admin import AdminError, messages, tracks
from rmq.admin.common import now_ms, parse_timestamp
from rmq.client import Message, MessageQueue
from rmq.client.admin import MQAdmin
from rmq.protocol import trace as T
from rmq.protocol.constants import DLQ_PREFIX, TRACE_TOPIC

from . import options as o
from .options import Args, Commands, Parser
from .output import Out, body_preview, date_text, front, human_ms, print_message, row

BY_KEY = "{:<50} {:>4} {:>40}"
BY_TIME = "{:<32} {:>4} {:>10}  {:<23}  {:<16} {}"
SEND = "{:<32}  {:<4}  {:<20}    {}"
DLQ_LIST = "{:<32}  {:<32}  {:<4}  {:<8}  {:<10}  {:<23}  {}"
DLQ_RESEND = "{:<32}  {:<32}  {:<12}  {}"
TRACE_ROW = "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}"


# -- finding ----------------------------------------------------------------------------------


async def query_msg_by_key(admin: MQAdmin, args: Args, out: Out) -> int:
    msgs = await messages.by_key(admin, args.topic, args.key, max_num=args.max_num, begin=args.begin, end=args.end)
    row(out, BY_KEY, "#Message ID", "#QID", "#Offset")
    for msg in msgs:
        row(out, BY_KEY, msg.msg_id, msg.queue_id, msg.queue_offset)
    return 0


async def query_msg_by_id(admin: MQAdmin, args: Args, out: Out) -> int:
    """Each message and where it stands with every group of its topic; with -g and -d, have
    that client consume it instead; with -s true, send it again (QueryMsgByIdSubCommand)."""
    ids = [i.strip() for i in args.msg_id.split(",") if i.strip()]
    if args.consumer_group and args.client_id:
        for msg_id in ids:
            result = await admin.consume_message_directly(args.consumer_group, args.client_id, msg_id)
            print(tracks.direct_result_text(result), file=out)
        return 0
    if args.send_message is not None:
        if args.send_message.strip().lower() == "true":
            for msg_id in ids:
                msg = await admin.view_message(msg_id)
                print(f"prepare resend msg. originalMsgId={msg_id}", file=out)
                sent = await messages.send(admin, tracks.resend_copy(msg), None)
                print(
                    f"SendResult [sendStatus={sent.status}, msgId={sent.msg_id}, "
                    f"offsetMsgId={sent.offset_msg_id}, messageQueue={sent.message_queue}, "
                    f"queueOffset={sent.queue_offset}]",
                    file=out,
                )
        return 0
    for n, msg_id in enumerate(ids):
        if n:
            print(file=out)
        msg = await admin.view_message(msg_id)
        print_message(msg, out)
        found = await tracks.message_tracks(admin, msg)
        if not found:
            print("\n\nWARN: No Consumer", file=out)
            continue
        print("\n", file=out)
        for track in found:
            print(track, file=out)
    return 0


async def query_msg_by_unique_key(admin: MQAdmin, args: Args, out: Out) -> int:
    msgs = await messages.by_unique_key(admin, args.topic, args.msg_id)
    for n, msg in enumerate(msgs if args.show_all else msgs[:1]):
        if n:
            print(file=out)
        print_message(msg, out)
    return 0


async def query_msg_by_offset(admin: MQAdmin, args: Args, out: Out) -> int:
    mq = MessageQueue(args.topic, args.broker_name, args.queue_id)
    print_message(await messages.at_offset(admin, mq, args.offset), out)
    return 0


async def query_msg_by_time(admin: MQAdmin, args: Args, out: Out) -> int:
    """A page of the topic's messages in the time range, newest first unless --oldestFirst,
    after a line saying how many matched and which of them are shown."""
    now = now_ms()
    begin = parse_timestamp(args.begin, now) if args.begin else now - 3600_000
    end = parse_timestamp(args.end, now) if args.end else now
    if begin > end:
        raise AdminError("the begin timestamp is after the end timestamp")
    found = await messages.by_time(
        admin, args.topic, begin, end, page=args.page, size=args.page_size, newest_first=not args.oldest_first
    )
    print(f"{args.topic} {human_ms(begin)} .. {human_ms(end)}: {found.summary()}", file=out)
    row(out, BY_TIME, "#Message ID", "#QID", "#Offset", "#Store Time", "#Tags", "#Keys")
    for m in found.messages:
        row(out, BY_TIME, m.msg_id, m.queue_id, m.queue_offset, human_ms(m.store_timestamp), m.tags or "", m.keys or "")
    return 0


# -- reading queues ---------------------------------------------------------------------------


def _decode(body: bytes, charset: str) -> str:
    try:
        return body.decode(charset, "replace")
    except LookupError:
        raise AdminError(f"unknown charset {charset!r}") from None


def _msg_line(msg: Any, args: Args) -> str:
    body = _decode(msg.body, args.charset) if args.print_body else "NOT PRINT BODY"
    text = (
        f"MessageExt [queueId={msg.queue_id}, queueOffset={msg.queue_offset}, commitLogOffset={msg.commitlog_offset}, "
        f"storeTimestamp={msg.store_timestamp}, reconsumeTimes={msg.reconsume_times}, topic={msg.topic}, "
        f"tags={msg.tags}, keys={msg.keys}]"
    )
    return f"MSGID: {msg.msg_id} {text} BODY: {body}"


async def print_msg(admin: MQAdmin, args: Args, out: Out) -> int:
    queues = messages.matching_by_queue(admin, args.topic, args.sub_expression, args.begin, args.end)
    async with aclosing(queues):  # an unknown charset stops it early
        async for mq, low, high, msgs in queues:
            print(f"minOffset={low}, maxOffset={high}, {mq}", file=out)
            for msg in msgs:
                print(_msg_line(msg, args), file=out)
            print("--------------------------------------------------------", file=out)
    return 0


async def print_msg_by_queue(admin: MQAdmin, args: Args, out: Out) -> int:
    mq = MessageQueue(args.topic, args.broker_name, args.queue_id)
    _, _, msgs = await messages.matching(admin, mq, args.sub_expression, args.begin, args.end)
    if args.print_msg:
        for msg in msgs:
            print(_msg_line(msg, args), file=out)
    if args.calculate:
        for tag, count in sorted(Counter(m.tags or "" for m in msgs).items(), key=lambda t: (-t[1], t[0])):
            print(f"Tag: {tag:<30} Count: {count}", file=out)
    return 0


async def query_cq(admin: MQAdmin, args: Args, out: Out) -> int:
    body = await messages.consume_queue(
        admin, args.topic, args.queue, args.index, args.count, args.group, args.broker_addr
    )
    if body.get("subscriptionData"):
        print(f"Subscription data: \n{json.dumps(body['subscriptionData'], indent=4)}", file=out)
        print("======================================", file=out)
    print(f"Queue data: \nmax: {body.get('maxQueueIndex')}, min: {body.get('minQueueIndex')}", file=out)
    print("======================================", file=out)
    for i, entry in enumerate(body.get("queueData") or [], args.index):
        print(f"idx: {i}", file=out)
        text = (
            f"ConsumeQueueData{{physicOffset={entry['physicOffset']}, physicSize={entry['physicSize']}, "
            f"tagsCode={entry['tagsCode']}, extendDataJson='null', bitMap='null', eval=false, "
            f"msg='{entry.get('msg', '')}'}}"
        )
        print(text, file=out)
        print("======================================", file=out)
    return 0


async def query_msg_trace_by_id(admin: MQAdmin, args: Args, out: Out) -> int:
    """Java's layout: each Pub, then each consumer group's SubAfter records (SubBefore is
    not shown); the client host is the trace message's born host."""
    topic = args.trace_topic or TRACE_TOPIC
    views = await messages.trace_views(admin, args.msg_id, topic, max_num=args.max_num, begin=args.begin, end=args.end)
    if not any(ctx.trace_type is not T.SUB_BEFORE for ctx, _ in views):
        raise AdminError(f"no trace of message {args.msg_id} in {topic}")
    consumers: dict[str, list[tuple[T.TraceContext, str]]] = {}
    for ctx, host in sorted(views, key=lambda v: v[0].timestamp):
        status = "success" if ctx.success else "failed"
        if ctx.trace_type is T.PUB:
            row(out, TRACE_ROW, "#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status")
            row(out, TRACE_ROW, "Pub", ctx.group_name, host, date_text(ctx.timestamp), f"{ctx.cost_time}ms", status)
            print(file=out)
        elif ctx.trace_type is T.SUB_AFTER:
            consumers.setdefault(ctx.group_name, []).append((ctx, host))
    for group, subs in consumers.items():
        row(out, TRACE_ROW, "#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status")
        for ctx, host in subs:
            status = "success" if ctx.success else "failed"
            row(out, TRACE_ROW, "Sub", group, host, date_text(ctx.timestamp), f"{ctx.cost_time}ms", status)
        print(file=out)
    return 0


# -- sending and dead letters -----------------------------------------------------------------


async def send_message(admin: MQAdmin, args: Args, out: Out) -> int:
    msg = Message(args.topic, args.body, tags=args.tags, keys=args.keys)
    queue = None
    if args.broker_name is not None or args.queue_id is not None:
        if args.broker_name is None or args.queue_id is None:
            raise AdminError("-b brokerName and -i queueId go together")
        queue = MessageQueue(args.topic, args.broker_name, args.queue_id)
    result = await messages.send(admin, msg, queue)
    mq = result.message_queue
    row(out, SEND, "#Broker Name", "#QID", "#Send Result", "#MsgId")
    row(out, SEND, mq.broker_name, mq.queue_id, result.status, result.msg_id)
    return 0


async def dlq_list(admin: MQAdmin, args: Args, out: Out) -> int:
    msgs = await messages.dead_letters(admin, args.group, args.count)
    row(out, DLQ_LIST, "#Message ID", "#Origin Topic", "#QID", "#Offset", "#Reconsume", "#Store Time", "#Body")
    for m in msgs:
        stored, body = human_ms(m.store_timestamp), front(body_preview(m.body), 60)
        origin = messages.origin_topic(m) or ""
        row(out, DLQ_LIST, m.msg_id, origin, m.queue_id, m.queue_offset, m.reconsume_times, stored, body)
    print(f"Total: {len(msgs)}", file=out)
    return 0


async def dlq_resend(admin: MQAdmin, args: Args, out: Out) -> int:
    msgs = await messages.dead_letters(admin, args.group, args.count)
    if args.msg_id:
        picked = messages.with_id(msgs, args.msg_id)
        if not picked:
            dlq = DLQ_PREFIX + args.group
            raise AdminError(f"message {args.msg_id} is not among the {len(msgs)} messages read from {dlq}")
        msgs = picked
    row(out, DLQ_RESEND, "#Message ID", "#Resent To", "#Send Result", "#New MsgId")
    failed = 0
    if not msgs:
        print("Resent: 0 of 0", file=out)
        return 0
    async with messages.admin_producer(admin) as producer:
        for m in msgs:
            done = await messages.resend(producer, m, args.topic)
            if done.topic is None:
                failed += 1
                row(out, DLQ_RESEND, m.msg_id, "", "SKIPPED", "no origin topic recorded; pass -t topic")
            elif done.result is None:
                failed += 1
                row(out, DLQ_RESEND, m.msg_id, done.topic, "FAILED", done.error)
            else:
                row(out, DLQ_RESEND, m.msg_id, done.topic, done.result.status, done.result.msg_id)
    print(f"Resent: {len(msgs) - failed} of {len(msgs)}", file=out)
    return 1 if failed else 0


def _query_key_args(p: Parser) -> None:
    o.topic(p)
    p.add_argument("-k", "--msgKey", dest="key", required=True)
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=int, default=0)
    p.add_argument("-e", "--endTimestamp", dest="end", type=int, default=(1 << 63) - 1)
    p.add_argument("-c", "--maxNum", dest="max_num", type=int, default=64)


def _query_time_args(p: Parser) -> None:
    o.topic(p)
    p.add_argument("-b", "--beginTimestamp", dest="begin", help="now, ms, or yyyy-MM-dd#HH:mm:ss:SSS (an hour ago)")
    p.add_argument("-e", "--endTimestamp", dest="end", help="now, ms, or yyyy-MM-dd#HH:mm:ss:SSS (now)")
    p.add_argument("-p", "--page", type=int, default=1, help="which page, from 1 (default 1)")
    size = f"messages on a page, at most {messages.MAX_PAGE_SIZE} (default {messages.PAGE_SIZE})"
    p.add_argument("-s", "--pageSize", dest="page_size", type=int, default=messages.PAGE_SIZE, help=size)
    p.add_argument(
        "-o", "--oldestFirst", dest="oldest_first", action="store_true", help="oldest first (default newest)"
    )


def _query_id_args(p: Parser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="offset message id(s), comma-separated")
    p.add_argument("-g", "--consumerGroup", dest="consumer_group", help="with -d: that client consumes the message")
    p.add_argument("-d", "--clientId", dest="client_id", help="the consumer's client id")
    p.add_argument("-s", "--sendMessage", dest="send_message", help="true: send the message again to its topic")
    p.add_argument("-u", "--unitName", dest="unit_name", help="unit name of the resending producer (accepted, unused)")


def _query_unique_args(p: Parser) -> None:
    o.topic(p)
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="the unique key (client message id)")
    p.add_argument("-a", "--showAll", dest="show_all", action="store_true", help="every stored copy")


def _send_args(p: Parser) -> None:
    o.topic(p)
    p.add_argument("-p", "--body", required=True)
    p.add_argument("-k", "--key", dest="keys")
    p.add_argument("-c", "--tags")
    p.add_argument("-b", "--broker", dest="broker_name", help="broker name (with -i)")
    p.add_argument("-i", "--qid", dest="queue_id", type=int, help="queue id (with -b)")


def _dlq_list_args(p: Parser) -> None:
    o.group(p)
    p.add_argument("-c", "--count", type=int, default=100, help="at most this many messages (default 100)")


def _dlq_resend_args(p: Parser) -> None:
    _dlq_list_args(p)
    p.add_argument("-i", "--msgId", dest="msg_id", help="only this message (unique key or offset id)")
    p.add_argument("-t", "--topic", help="send here instead of the recorded origin topic")


def _by_offset_args(p: Parser) -> None:
    o.topic(p)
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True)
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True)
    p.add_argument("-o", "--offset", type=int, required=True)
    p.add_argument("-f", "--bodyFormat", dest="body_format", help="accepted; the body is shown as text")


def _print_common(p: Parser) -> None:
    o.topic(p)
    p.add_argument("-c", "--charsetName", dest="charset", default="utf-8")
    p.add_argument("-s", "--subExpression", dest="sub_expression", default="*")
    p.add_argument("-b", "--beginTimestamp", dest="begin")
    p.add_argument("-e", "--endTimestamp", dest="end")
    p.add_argument("-d", "--printBody", dest="print_body", type=o.boolean, default=True)


def _print_by_queue_args(p: Parser) -> None:
    _print_common(p)
    p.add_argument("-a", "--brokerName", dest="broker_name", required=True)
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True)
    p.add_argument("-p", "--printMsg", dest="print_msg", type=o.boolean, default=False)
    p.add_argument("-f", "--calculate", type=o.boolean, default=False, help="count messages by tag")
    p.set_defaults(print_body=False)  # Java: printBody false(default) here, true for printMsg


def _query_cq_args(p: Parser) -> None:
    o.topic(p)
    p.add_argument("-q", "--queue", type=int, required=True)
    p.add_argument("-i", "--index", type=int, required=True)
    p.add_argument("-c", "--count", type=int, required=True)
    p.add_argument("-b", "--broker", dest="broker_addr")
    p.add_argument("-g", "--consumer", dest="group")


def _trace_args(p: Parser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True)
    p.add_argument("-t", "--traceTopic", dest="trace_topic")
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=int, default=0)
    p.add_argument("-e", "--endTimestamp", dest="end", type=int, default=(1 << 63) - 1)
    p.add_argument("-c", "--maxNum", dest="max_num", type=int, default=64)


COMMANDS: Commands = {
    "queryMsgByKey": ("find messages by key", query_msg_by_key, _query_key_args),
    "queryMsgById": ("print messages by offset message id", query_msg_by_id, _query_id_args),
    "queryMsgByUniqueKey": ("print a message by unique key", query_msg_by_unique_key, _query_unique_args),
    "sendMessage": ("send one message", send_message, _send_args),
    "dlqList": ("print a group's dead letters", dlq_list, _dlq_list_args),
    "dlqResend": ("send a group's dead letters back to their topics", dlq_resend, _dlq_resend_args),
    "queryMsgByOffset": ("print the message at a queue offset", query_msg_by_offset, _by_offset_args),
    "queryMsgByTime": ("print a page of a topic's messages in a time range", query_msg_by_time, _query_time_args),
    "printMsg": ("print a topic's messages", o.checked(print_msg), _print_common),
    "printMsgByQueue": ("print or count one queue's messages", o.checked(print_msg_by_queue), _print_by_queue_args),
    "queryCq": ("print consume queue entries", o.checked(query_cq), _query_cq_args),
    "queryMsgTraceById": ("print a message's trace", query_msg_trace_by_id, _trace_args),
}

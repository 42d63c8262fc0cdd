"""`rmq quickstart producer|consumer`: RocketMQ's quickstart examples (tools.sh).

    rmq quickstart producer -n 127.0.0.1:9876      # 1,000 x "Hello RocketMQ <i>" to TopicTest, TagA
    rmq quickstart consumer -n 127.0.0.1:9876      # print what arrives on TopicTest until Ctrl-C

Like `tools.sh org.apache.rocketmq.example.quickstart.Producer` / `...Consumer`: the
producer prints each SendResult as Java's toString does; the consumer (group
please_rename_unique_group_name_4, from the first offset) prints each message as
"<task> Receive New Messages: [MessageExt [...]]". The name server comes from `-n`, else
$NAMESRV_ADDR, else 127.0.0.1:9876. `--tls` / `--tls-config tls.properties` connect with TLS
(tlsopts.py); `--accessKey`/`--secretKey` (or $ROCKETMQ_ACCESS_KEY/$ROCKETMQ_SECRET_KEY) sign
requests for a broker with ACL (aclopts.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import trio

from rmq.client import ConsumeFromWhere, Message, MessageExt, MQClientError, Producer, PushConsumer, TlsClientSettings
from rmq.client.members import Instance

from .aclopts import acl_credentials, add_acl_arguments
from .tlsopts import add_tls_arguments, tls_option

DEFAULT_NAMESRV = "127.0.0.1:9876"


def _namesrv(value: str | None) -> str:
    return value or os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV


def _producer_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rmq quickstart producer", description="Send the quickstart messages.")
    p.add_argument("-n", "--namesrv", help="name server address(es), a:9876;b:9876 (default $NAMESRV_ADDR)")
    p.add_argument("-t", "--topic", default="TopicTest")
    p.add_argument("-g", "--group", default="please_rename_unique_group_name")
    p.add_argument("--tag", default="TagA")
    p.add_argument("-c", "--count", type=int, default=1000, help="messages to send (default 1000)")
    add_tls_arguments(p)
    add_acl_arguments(p)
    return p


def _consumer_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rmq quickstart consumer", description="Print the quickstart messages.")
    p.add_argument("-n", "--namesrv", help="name server address(es), a:9876;b:9876 (default $NAMESRV_ADDR)")
    p.add_argument("-t", "--topic", default="TopicTest")
    p.add_argument("-g", "--group", default="please_rename_unique_group_name_4")
    p.add_argument("-s", "--subscription", default="*", help='tag expression, e.g. "TagA || TagB"')
    p.add_argument("--count", type=int, help="stop after this many messages")
    p.add_argument("--seconds", type=float, help="stop after this many seconds")
    p.add_argument("--from", dest="start", choices=("first", "last"), default="first", help="where a new group starts")
    add_tls_arguments(p)
    add_acl_arguments(p)
    return p


def format_message_ext(msg: MessageExt, broker_name: str | None = None) -> str:
    """A MessageExt as Java's MessageExt.toString() prints it."""
    props = ", ".join(f"{k}={v}" for k, v in msg.properties.items())
    body = ", ".join(str(b - 256 if b > 127 else b) for b in msg.body)
    return (
        f"MessageExt [brokerName={broker_name}, queueId={msg.queue_id}, storeSize={msg.store_size}, "
        f"queueOffset={msg.queue_offset}, sysFlag={msg.sys_flag}, bornTimestamp={msg.born_timestamp}, "
        f"bornHost=/{msg.born_host[0]}:{msg.born_host[1]}, storeTimestamp={msg.store_timestamp}, "
        f"storeHost=/{msg.store_host[0]}:{msg.store_host[1]}, msgId={msg.msg_id}, "
        f"commitLogOffset={msg.commitlog_offset}, bodyCRC={msg.body_crc}, reconsumeTimes={msg.reconsume_times}, "
        f"preparedTransactionOffset={msg.prepared_transaction_offset}, toString()=Message{{topic='{msg.topic}', "
        f"flag={msg.flag}, properties={{{props}}}, body=[{body}], transactionId='null'}}]"
    )


def _broker_name_of(instance: Instance, msg: MessageExt) -> str | None:
    addr = f"{msg.store_host[0]}:{msg.store_host[1]}"
    for bd in instance.brokers.values():
        if addr in bd.addrs.values():
            return bd.broker_name
    return None


async def run_producer(
    namesrv: str,
    topic: str,
    group: str,
    tag: str,
    count: int,
    out: TextIO,
    tls: bool | TlsClientSettings = False,
    credentials: Mapping[str, Any] | None = None,
) -> int:
    failed = 0
    async with Producer(group, namesrv, tls=tls, **(credentials or {})) as producer:
        for i in range(count):
            try:
                result = await producer.send(Message(topic, f"Hello RocketMQ {i}", tags=tag))
            except MQClientError as exc:
                failed += 1
                print(f"send {i} failed: {exc}", file=sys.stderr)
                await trio.sleep(1)
                continue
            print(result, file=out)
    return 1 if failed else 0


async def run_consumer(
    namesrv: str,
    topic: str,
    group: str,
    expression: str,
    count: int | None,
    seconds: float | None,
    start: ConsumeFromWhere,
    out: TextIO,
    tls: bool | TlsClientSettings = False,
    credentials: Mapping[str, Any] | None = None,
) -> int:
    received = 0
    enough = trio.Event()
    consumer: PushConsumer

    async def handle(msg: MessageExt) -> None:
        nonlocal received
        name = trio.lowlevel.current_task().name
        print(
            f"{name} Receive New Messages: [{format_message_ext(msg, _broker_name_of(consumer.instance, msg))}]",
            file=out,
        )
        received += 1
        if count is not None and received >= count:
            enough.set()

    consumer = PushConsumer(group, namesrv, handler=handle, consume_from_where=start, tls=tls, **(credentials or {}))
    consumer.subscribe(topic, expression)
    async with consumer:
        print("Consumer Started.", file=out)
        with trio.move_on_after(seconds if seconds is not None else float("inf")):
            await enough.wait()
    return 0 if count is None or received >= count else 1


def _run(fn: object, *args: object) -> int:
    try:
        return int(trio.run(fn, *args))  # type: ignore[arg-type]
    except KeyboardInterrupt:
        return 130
    except MQClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def producer_main(argv: Sequence[str] | None = None) -> int:
    args = _producer_parser().parse_args(argv)
    try:
        tls = tls_option(args)
        credentials = acl_credentials(args)
    except MQClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _run(
        run_producer, _namesrv(args.namesrv), args.topic, args.group, args.tag, args.count, sys.stdout, tls, credentials
    )


def consumer_main(argv: Sequence[str] | None = None) -> int:
    args = _consumer_parser().parse_args(argv)
    start = ConsumeFromWhere.FIRST_OFFSET if args.start == "first" else ConsumeFromWhere.LAST_OFFSET
    try:
        tls = tls_option(args)
        credentials = acl_credentials(args)
    except MQClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _run(
        run_consumer,
        _namesrv(args.namesrv),
        args.topic,
        args.group,
        args.subscription,
        args.count,
        args.seconds,
        start,
        sys.stdout,
        tls,
        credentials,
    )

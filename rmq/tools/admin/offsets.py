"""mqadmin's offset commands: resetOffsetByTime, resetOffsetByTimeOld, cloneGroupOffset,
skipAccumulatedMessage."""

from __future__ import annotations

from rmq.admin import offsets
from rmq.admin.common import now_ms, parse_timestamp
from rmq.client import MessageQueue
from rmq.client.admin import MQAdmin, RollbackStats

from . import options as o
from .options import Args, Commands, Parser
from .output import Out, front, java_bool, row

RESET = "{:<40}  {:<40}  {:<40}"
RESET_OLD = "{:<20}  {:<20}  {:<20}  {:<20}  {:<20}  {:<20}"


def _rollback_title(args: Args, timestamp: int, group_word: str) -> str:
    return (
        f"rollback consumer offset by specified {group_word}[{args.group}], topic[{args.topic}], "
        f"force[{java_bool(args.force)}], timestamp(string)[{args.timestamp}], timestamp(long)[{timestamp}]"
    )


def _print_reset(out: Out, offsets: dict[MessageQueue, int]) -> None:
    row(out, RESET, "#brokerName", "#queueId", "#offset")
    for mq, offset in sorted(offsets.items()):
        row(out, RESET, front(mq.broker_name, 32), mq.queue_id, offset)


def _print_reset_old(out: Out, args: Args, timestamp: int, stats: list[RollbackStats]) -> None:
    print(_rollback_title(args, timestamp, "consumerGroup"), file=out)
    headers = ("#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset", "#resetOffset")
    row(out, RESET_OLD, *headers)
    for s in stats:
        name = front(s.broker_name, 32)
        row(out, RESET_OLD, name, s.queue_id, s.broker_offset, s.consumer_offset, s.timestamp_offset, s.rollback_offset)


async def reset_offset_by_time(admin: MQAdmin, args: Args, out: Out) -> int:
    timestamp = parse_timestamp(args.timestamp, now_ms())
    reset = await offsets.reset_by_time(admin, args.topic, args.group, timestamp, force=args.force, cpp=args.cpp)
    if reset.stats is not None:  # nobody online to tell: reset in the brokers instead
        _print_reset_old(out, args, timestamp, reset.stats)
        return 0
    print(_rollback_title(args, timestamp, "group"), file=out)
    _print_reset(out, reset.offsets or {})
    return 0


async def reset_offset_by_time_old(admin: MQAdmin, args: Args, out: Out) -> int:
    timestamp = parse_timestamp(args.timestamp, now_ms())
    stats = await admin.reset_offset_by_time_old(args.group, args.topic, timestamp, force=args.force)
    _print_reset_old(out, args, timestamp, stats)
    return 0


async def clone_group_offset(admin: MQAdmin, args: Args, out: Out) -> int:
    await offsets.clone(admin, args.src_group, args.dest_group, args.topic, args.offline)
    print(f"clone group offset success. srcGroup[{args.src_group}], destGroup=[{args.dest_group}], "
          f"topic[{args.topic}]", file=out)  # fmt: skip
    return 0


async def skip_accumulated_message(admin: MQAdmin, args: Args, out: Out) -> int:
    _print_reset(out, await offsets.skip_accumulated(admin, args.topic, args.group, force=args.force))
    return 0


def _reset_old_args(p: Parser) -> None:
    o.group(p)
    o.topic(p)
    p.add_argument("-s", "--timestamp", required=True, help="now, ms since the epoch, or yyyy-MM-dd#HH:mm:ss:SSS")
    p.add_argument("-f", "--force", type=o.boolean, default=True, help="true: also move offsets forward (default)")


def _reset_args(p: Parser) -> None:
    _reset_old_args(p)
    p.add_argument("-c", "--cplus", dest="cpp", action="store_true", help="the group's clients are C++ clients")


def _clone_args(p: Parser) -> None:
    p.add_argument("-s", "--srcGroup", dest="src_group", required=True)
    p.add_argument("-d", "--destGroup", dest="dest_group", required=True)
    o.topic(p)
    p.add_argument("-o", "--offline", type=o.boolean, default=False)


def _skip_args(p: Parser) -> None:
    o.group(p)
    o.topic(p)
    p.add_argument("-f", "--force", type=o.boolean, default=True)
    p.add_argument("-c", "--cluster", help="accepted for Java compatibility")


COMMANDS: Commands = {
    "resetOffsetByTime": ("reset a group's offsets to a time", reset_offset_by_time, _reset_args),
    "resetOffsetByTimeOld": ("reset a group's offsets in the brokers only", reset_offset_by_time_old, _reset_old_args),
    "cloneGroupOffset": ("copy a group's offsets to another group", clone_group_offset, _clone_args),
    "skipAccumulatedMessage": ("move a group to the end of a topic", skip_accumulated_message, _skip_args),
}

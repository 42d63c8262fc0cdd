"""What mqadmin's commands share on the command line: the options several take, their value
types, and the shape of a command (help, runner, options)."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable

import trio

from rmq.admin import AdminError
from rmq.client.admin import MQAdmin

from .output import Out

Args = argparse.Namespace
Parser = argparse.ArgumentParser
Runner = Callable[[MQAdmin, Args, Out], Awaitable[int]]
# name → (one-line help, runner, options)
Commands = dict[str, tuple[str, Runner, Callable[[Parser], None]]]


def boolean(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return value == "true"


def seconds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def broker_or_cluster(p: Parser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("-b", "--brokerAddr", dest="broker_addr", help="broker address ip:port")
    which.add_argument("-c", "--clusterName", dest="cluster", help="every master of this cluster")


def topic(p: Parser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")


def group(p: Parser, required: bool = True) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=required, help="consumer group name")


def key_value(p: Parser) -> None:
    p.add_argument("-k", "--key", required=True, help="config key")
    p.add_argument("-v", "--value", required=True, help="config value")


def broker_name(p: Parser) -> None:
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True)


def checked(runner: Runner) -> Runner:
    """`runner`, after refusing counts and sizes of 0 or less."""

    async def run(admin: MQAdmin, args: Args, out: Out) -> int:
        for name in ("count", "amount", "size", "message_size"):
            value = getattr(args, name, None)
            if isinstance(value, int) and value <= 0:
                raise AdminError(f"{name} must be > 0, got {value}")
        return await runner(admin, args, out)

    return run


async def repeat(args: Args, once: Callable[[], Awaitable[int]]) -> int:
    """`once()`, then with `-i N` again every N seconds until interrupted (mqadmin's
    clusterList, haStatus, getSyncStateSet and getBrokerEpoch loop the same way); the last
    exit code."""
    code = await once()
    while args.interval:
        await trio.sleep(args.interval)
        code = await once()
    return code


def interval(p: Parser) -> None:
    """-i, with no value 3 seconds (haStatus, getSyncStateSet, getBrokerEpoch)."""
    p.add_argument(
        "-i", "--interval", type=seconds, nargs="?", const=3, help="print again every this many seconds (default 3)"
    )

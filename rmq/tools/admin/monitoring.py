"""mqadmin's startMonitoring: a round of MonitorService's work every --interval seconds,
printed as DefaultMonitorListener logs it, until Ctrl-C (as Java) or for --rounds rounds.
Java waits 20 s before its first round; this one starts at once."""

from __future__ import annotations

import time

import trio

from rmq.admin import monitoring
from rmq.client.admin import MQAdmin

from . import options as o
from .options import Args, Commands, Parser
from .output import Out

PREFIX = "[MONITOR] "
NOTIFY = PREFIX + " [NOTIFY] "  # sic: Java's two spaces
RULE = "========================================="


def print_round(reports: list[monitoring.GroupReport], out: Out) -> None:
    for report in reports:
        for undone in report.undone:
            print(f"{PREFIX}reportUndoneMsgs: {undone}", file=out)
        if report.subscription_differs:
            print(f"{NOTIFY}reportConsumerRunningInfo: ConsumerGroup: {report.group}, Subscription different", file=out)
        for client_id, text in report.notes:
            line = f"reportConsumerRunningInfo: ConsumerGroup: {report.group}, ClientId: {client_id}, {text.rstrip()}"
            print(NOTIFY + line, file=out)


async def start_monitoring(admin: MQAdmin, args: Args, out: Out) -> int:
    done = 0
    while True:
        begin = time.monotonic()
        print(f"{PREFIX}{RULE}beginRound", file=out)
        print_round(await monitoring.monitor_round(admin), out)
        print(f"{PREFIX}{RULE}endRound", file=out)
        spent = int((time.monotonic() - begin) * 1000)
        print(f"Execute one round monitor work, spent timemills: {spent}", file=out)
        out.flush()
        done += 1
        if args.rounds and done >= args.rounds:
            return 0
        await trio.sleep(args.interval)


def _monitoring_args(p: Parser) -> None:
    p.add_argument("--rounds", type=int, default=0, help="stop after this many rounds (ours; default: until Ctrl-C)")
    p.add_argument("--interval", type=o.seconds, default=60, help="seconds between rounds (ours; Java's 60)")


COMMANDS: Commands = {
    "startMonitoring": (
        "print consumer groups' backlogs and client problems every round",
        start_monitoring,
        _monitoring_args,
    ),
}

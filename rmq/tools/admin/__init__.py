"""`rmq admin` / `mqadmin`: topics, groups, offsets and messages from the command line.

    rmq admin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t Orders -r 8 -w 8
    rmq admin topicStatus -n 127.0.0.1:9876 -t Orders
    rmq admin queryMsgByKey -n 127.0.0.1:9876 -t Orders -k order-42
    rmq admin dlqResend -n 127.0.0.1:9876 -g my_group

Subcommands carry mqadmin's names and flags (`-n` defaults to $NAMESRV_ADDR) and print
mqadmin's tables. `dlqList` and `dlqResend` are ours: they read `%DLQ%<group>` and send
its messages back to the topic they came from. updateAclConfig, deleteAccessConfig,
updateGlobalWhiteAddr and clusterAclConfigVersion manage brokers' ACL (docs/security.md);
`--accessKey`/`--secretKey` sign the requests (aclopts.py). `--tls` (or
`--tls-config tls.properties`) connects with TLS (tlsopts.py).

The commands are thin: each parses its options, calls the admin operations of rmq.admin
(the dashboard's too) or MQAdmin, and prints. One module per command group, as in rmq.admin:
topics, groups, brokers, offsets, messages, consume, monitoring, export, probes, acl,
controller (RocketMQ 5's controller, `-a` its members), and namesrv and producers (single
MQAdmin calls).

A failure prints one line on stderr ("error: <command>: <what failed>") and exits 1;
bad usage exits 2.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import trio

from rmq.admin.common import parse_timestamp as parse_timestamp
from rmq.client import MQAdmin, MQClientError

from ..aclopts import acl_credentials, add_acl_arguments
from ..tlsopts import add_tls_arguments, tls_option
from . import (
    acl,
    brokers,
    consume,
    controller,
    export,
    groups,
    messages,
    monitoring,
    namesrv,
    offsets,
    probes,
    producers,
    topics,
)
from .options import Commands, Parser
from .output import Out
from .output import human_ms as human_ms

# `mqadmin help` lists the commands in this order (mqadmin's first, then the maintenance ones)
ORDER = (
    "updateTopic", "updateTopicPerm", "deleteTopic", "topicList", "topicRoute", "topicStatus", "clusterList",
    "brokerStatus", "haStatus", "leadershipTransfer", "updateSubGroup", "deleteSubGroup", "consumerProgress",
    "consumerConnection", "producer", "startMonitoring",
    "queryMsgByKey", "queryMsgById", "queryMsgByUniqueKey", "resetOffsetByTime", "resetOffsetByTimeOld",
    "sendMessage", "consumeMessage", "dlqList", "dlqResend", "updateAclConfig", "deleteAccessConfig",
    "updateGlobalWhiteAddr",
    "clusterAclConfigVersion", "getBrokerConfig", "updateBrokerConfig", "brokerConsumeStats", "cleanExpiredCQ",
    "cleanUnusedTopic", "deleteExpiredCommitLog", "getNamesrvConfig", "updateNamesrvConfig", "wipeWritePerm",
    "addWritePerm", "updateKvConfig", "deleteKvConfig", "updateOrderConf", "topicClusterList", "allocateMQ",
    "producerConnection", "consumerStatus", "getConsumerConfig", "cloneGroupOffset", "skipAccumulatedMessage",
    "queryMsgByOffset", "queryMsgByTime", "printMsg", "printMsgByQueue", "queryCq", "queryMsgTraceById",
    "sendMsgStatus", "checkMsgSendRT", "clusterRT", "statsAll", "exportMetadata", "exportConfigs", "exportMetrics",
    "getControllerMetaData", "getSyncStateSet", "getBrokerEpoch", "electMaster", "cleanBrokerMetadata",
    "getControllerConfig", "updateControllerConfig",
)  # fmt: skip
ALIASES = {"deleteAclConfig": "deleteAccessConfig"}  # RocketMQ's command name; deleteAccessConfig is its alias


def all_commands() -> Commands:
    found: Commands = {}
    for group in (
        topics,
        brokers,
        namesrv,
        groups,
        offsets,
        messages,
        probes,
        acl,
        producers,
        consume,
        monitoring,
        export,
        controller,
    ):
        found.update(group.COMMANDS)
    return {name: found[name] for name in ORDER}


def build_parser() -> Parser:
    parser = Parser(prog="mqadmin", description="Administer a RocketMQ cluster.")
    add_acl_arguments(parser, dest_prefix="global")  # before the command: for every command
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for name, (help_, runner, add_options) in all_commands().items():
        aliases = [alias for alias, target in ALIASES.items() if target == name]
        p = sub.add_parser(name, help=help_, description=help_, aliases=aliases)
        p.add_argument("-n", "--namesrvAddr", dest="namesrv", help="name server(s), a:9876;b:9876 ($NAMESRV_ADDR)")
        add_tls_arguments(p)
        if name not in acl.ACCOUNT_COMMANDS:
            add_acl_arguments(p)
        add_options(p)
        p.set_defaults(run=runner)
    return parser


def usage() -> str:
    lines = ["usage: mqadmin <command> [-n namesrvAddr] [options]", "", "commands:"]
    lines += [f"  {name:<24}{help_}" for name, (help_, _, _) in all_commands().items()]
    lines += ["", "See `mqadmin help <command>` for a command's options."]
    return "\n".join(lines)


async def run(argv: Sequence[str], out: Out | None = None, err: Out | None = None) -> int:
    """Run one mqadmin command line in the caller's Trio loop; returns the exit code."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        if len(argv) < 2:
            print(usage(), file=out if argv else err)
            return 0 if argv else 2
        argv = [argv[1], "--help"]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse printed the help or the usage error
        return exc.code if isinstance(exc.code, int) else 2
    try:
        credentials = acl_credentials(args, tools_yml=True)
        async with MQAdmin(args.namesrv, tls=tls_option(args), **credentials) as admin:
            code: int = await args.run(admin, args, out)
            return code
    except MQClientError as exc:
        print(f"error: {args.command}: {exc}", file=err)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return trio.run(run, sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:
        return 130

"""mqadmin's broker and cluster commands: clusterList, brokerStatus, haStatus,
leadershipTransfer, getBrokerConfig, updateBrokerConfig, brokerConsumeStats, statsAll and the
maintenance requests (cleanExpiredCQ, cleanUnusedTopic, deleteExpiredCommitLog)."""

from __future__ import annotations

import sys

from rmq.admin import brokers
from rmq.admin.common import now_ms
from rmq.client.admin import MQAdmin
from rmq.protocol import RequestCode
from rmq.protocol.bodies.stats import ConsumeStatsList

from . import options as o
from .options import Args, Commands, Parser, Runner
from .output import Out, config_table, date_text, front, human_ms, row

CLUSTER_LIST = "{:<16}  {:<22}  {:<4}  {:<22} {:<16} {:>19} {:>19} {:>10} {:>5} {:>6}"
CLUSTER_MORE = "{:<16}  {:<32} {:>14} {:>14} {:>14} {:>14}"
DLEDGER_COLUMN = "  {}"
BROKER_STATUS = "{:<32}: {}"
BROKER_STATUS_ADDR = "{:<24} {:<32}: {}"
HA_SLAVES = "{:<32}  {:<16} {:>16} {:>16} {:>16} {:>16}"
HA_SLAVE_ROW = "{:<32}  {:<16d} {:>16d} {:>16.2f} {:>16} {:>16d}"
BROKER_CONSUME = "{:<64}  {:<64}  {:<32}  {:<4}  {:<20}  {:<20}  {:<20}  {}"
STATS_HEAD = "{:<64}  {:<64} {:>12} {:>11} {:>11} {:>14} {:>14}"
STATS_ROW = "{:<64}  {:<64} {:>12d} {:>11.2f} {:>11.2f} {:>14d} {:>14d}"
STATS_NO_CONSUMER = "{:<64}  {:<64} {:>12d} {:>11.2f} {:>11} {:>14d} {:>14}"


# -- clusterList ------------------------------------------------------------------------------


def _num(table: dict[str, str], key: str) -> float:
    """The first number of a runtime-info value ("putTps" holds three), 0 if absent."""
    try:
        return float(table.get(key, "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


def _cluster_row(out: Out, b: brokers.BrokerRuntime, now: int, dledger: bool = False) -> None:
    t = b.table
    earliest = _num(t, "earliestMessageTimeStamp")
    hours = (now - earliest) / 3600 / 1000 if earliest > 0 else 0.0
    in_tps = "{:9.2f}({},{}ms)".format(
        _num(t, "putTps"), t.get("sendThreadPoolQueueSize", ""), t.get("sendThreadPoolQueueHeadWaitTimeMills", "")
    )
    out_tps = "{:9.2f}({},{}ms)".format(
        _num(t, "getTransferedTps"),
        t.get("pullThreadPoolQueueSize", ""),
        t.get("pullThreadPoolQueueHeadWaitTimeMills", ""),
    )
    version = t.get("brokerVersionDesc", "")
    wait = t.get("pageCacheLockTimeMills", "")
    space = _num(t, "commitLogDiskRatio")
    fields = (b.cluster, b.name, b.broker_id, b.addr, version, in_tps, out_tps, wait, f"{hours:2.2f}", f"{space:.4f}")
    if dledger:  # e.g. "n1 LEADER term 3"
        member = f"{t.get('dLegerSelfId', '-')} {t.get('dLegerRole', '-')} term {t.get('dLegerTerm', '-')}"
        row(out, CLUSTER_LIST + DLEDGER_COLUMN, *fields, member)
    else:
        row(out, CLUSTER_LIST, *fields)


def _cluster_more_row(out: Out, b: brokers.BrokerRuntime) -> None:
    def delta(later: str, earlier: str) -> int:
        return int(_num(b.table, later) - _num(b.table, earlier))

    row(
        out,
        CLUSTER_MORE,
        b.cluster,
        b.name,
        delta("msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning"),
        delta("msgGetTotalTodayMorning", "msgGetTotalYesterdayMorning"),
        delta("msgPutTotalTodayNow", "msgPutTotalTodayMorning"),
        delta("msgGetTotalTodayNow", "msgGetTotalTodayMorning"),
    )


async def cluster_list(admin: MQAdmin, args: Args, out: Out) -> int:
    """One row per broker, masters and slaves (#BID), as mqadmin's clusterList; with -i,
    again every interval seconds until interrupted."""
    return await o.repeat(args, lambda: _cluster_list_once(admin, args, out))


async def _cluster_list_once(admin: MQAdmin, args: Args, out: Out) -> int:
    rows = await brokers.runtimes(admin, args.cluster)
    failed = [b for b in rows if b.error is not None]
    for b in failed:  # as mqadmin: the row is printed anyway
        print(f"warning: {b.error}", file=sys.stderr)
    dledger = any("dLegerRole" in b.table for b in rows)  # DLedger members: who leads, in which term
    if args.more_stats:
        totals = ("#InTotalYest", "#OutTotalYest", "#InTotalToday", "#OutTotalToday")
        row(out, CLUSTER_MORE, "#Cluster Name", "#Broker Name", *totals)
    else:
        loads = ("#InTPS(LOAD)", "#OutTPS(LOAD)", "#PCWait(ms)", "#Hour", "#SPACE")
        head = ("#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", *loads)
        row(out, CLUSTER_LIST + DLEDGER_COLUMN if dledger else CLUSTER_LIST, *head, *(("#DLedger",) if dledger else ()))
    now = now_ms()
    for b in rows:
        if args.more_stats:
            _cluster_more_row(out, b)
        else:
            _cluster_row(out, b, now, dledger)
    return 1 if failed else 0


# -- one broker -------------------------------------------------------------------------------


async def broker_status(admin: MQAdmin, args: Args, out: Out) -> int:
    """A broker's runtime table (a slave's holds its replication fields); `-c`: every master
    and slave of the cluster, each line led by its address, a broker that fails skipped."""
    if args.broker_addr:
        table = await admin.broker_runtime_info(args.broker_addr)
        for key in sorted(table):
            row(out, BROKER_STATUS, key, table[key])
        return 0
    failed = 0
    for b in await brokers.runtimes(admin, args.cluster):
        if b.error is not None:  # as mqadmin: report it and go on with the others
            print(f"warning: {b.error}", file=sys.stderr)
            failed += 1
            continue
        for key in sorted(b.table):
            row(out, BROKER_STATUS_ADDR, b.addr, key, b.table[key])
    return 1 if failed else 0


async def ha_status(admin: MQAdmin, args: Args, out: Out) -> int:
    """RocketMQ 5.x's haStatus layout: a master's slaves, or a slave's master (`-c`: every
    master of the cluster); with -i, again every interval seconds until interrupted."""
    return await o.repeat(args, lambda: _ha_status_once(admin, args, out))


async def _ha_status_once(admin: MQAdmin, args: Args, out: Out) -> int:
    async for addr, info in brokers.ha_statuses(admin, args.broker_addr, args.cluster):
        if info.get("master"):
            conns = info.get("haConnectionInfo") or []
            print(f"\n#MasterAddr\t{addr}", file=out)
            print(f"#MasterCommitLogMaxOffset\t{info.get('masterCommitLogMaxOffset', 0)}", file=out)
            print(f"#SlaveNum\t{len(conns)}\n#InSyncSlaveNum\t{info.get('inSyncSlaveNums', 0)}", file=out)
            row(out, HA_SLAVES, "#SlaveAddr", "#SlaveAckOffset", "#Diff", "#TransferSpeed(KB/s)", "#Status",
                "#TransferFromWhere")  # fmt: skip
            for c in conns:
                print(
                    HA_SLAVE_ROW.format(
                        str(c.get("addr", "")), int(c.get("slaveAckOffset", 0)), int(c.get("diff", 0)),
                        int(c.get("transferredByteInSecond", 0)) / 1024.0,
                        "OK" if c.get("inSync") else "Fall Behind", int(c.get("transferFromWhere", 0)),
                    ),
                    file=out,
                )  # fmt: skip
        else:
            c = info.get("haClientRuntimeInfo") or {}
            print(f"\n#MasterAddr\t{c.get('masterAddr', '')}", file=out)
            print(f"#CommitLogMaxOffset\t{c.get('maxOffset', 0)}", file=out)
            print(f"#TransferSpeed(KB/s)\t{int(c.get('transferredByteInSecond', 0)) / 1024.0:.2f}", file=out)
            print(f"#LastReadTime\t{human_ms(int(c.get('lastReadTimestamp', 0)))}", file=out)
            print(f"#LastWriteTime\t{human_ms(int(c.get('lastWriteTimestamp', 0)))}", file=out)
            print(f"#MasterFlushOffset\t{c.get('masterFlushOffset', 0)}", file=out)
    return 0


async def leadership_transfer(admin: MQAdmin, args: Args, out: Out) -> int:
    """Hand a DLedger group's leadership to one member (-t, default its preferredLeaderId)."""
    leader = await admin.transfer_leadership(args.broker_addr, args.transferee)
    print(f"leadership transferred to {leader}", file=out)
    return 0


# -- settings ---------------------------------------------------------------------------------


async def get_broker_config(admin: MQAdmin, args: Args, out: Out) -> int:
    if args.broker_addr:
        config_table(out, args.broker_addr, await admin.broker_config(args.broker_addr))
        return 0
    async for addr, master, table in brokers.configs(admin, args.cluster):
        config_table(out, f"Master: {addr}" if master is None else f"My Master: {master}=====Slave: {addr}", table)
    return 0


async def update_broker_config(admin: MQAdmin, args: Args, out: Out) -> int:
    props = {args.key.strip(): args.value.strip()}
    async for addr in brokers.update_config(admin, props, args.broker_addr, args.cluster, slaves=args.update_all):
        print(f"update broker config success, {addr}", file=out)
    return 0


# -- consumption and traffic ------------------------------------------------------------------


async def broker_consume_stats(admin: MQAdmin, args: Args, out: Out) -> int:
    stats = ConsumeStatsList.from_json(await admin.broker_consume_stats(args.broker_addr, is_order=args.order))
    row(out, BROKER_CONSUME, "#Topic", "#Group", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset",
        "#Diff", "#LastTime")  # fmt: skip
    for entry in stats.consume_stats_list:
        for group, stats_list in entry.items():
            for cs in stats_list:
                for mq, ow in sorted(cs.offsets.items()):
                    if ow.diff < args.level:
                        continue
                    last = ow.last_timestamp
                    row(out, BROKER_CONSUME, front(mq.topic, 64), group, front(mq.broker_name, 32), mq.queue_id,
                        ow.broker_offset, ow.consumer_offset, ow.diff, date_text(last) if last else "N/A")  # fmt: skip
    print(f"\nDiff Total: {stats.total_diff}", file=out)
    return 0


async def stats_all(admin: MQAdmin, args: Args, out: Out) -> int:
    """Per topic and consumer group: backlog, in/out TPS over the last minute and 24-hour
    counts, from every master's VIEW_BROKER_STATS_DATA (StatsAllSubCommand's layout)."""
    row(out, STATS_HEAD, "#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour",
        "#OutMsg24Hour")  # fmt: skip
    for topic in await brokers.stat_topics(admin, args.topic):
        for t in await brokers.traffic(admin, topic):
            if t.group is None:
                if not args.active or t.in_day > 0:
                    row(out, STATS_NO_CONSUMER, front(topic, 64), "", 0, t.in_tps, "", t.in_day, "NO_CONSUMER")
            elif not args.active or t.in_day > 0 or t.out_day > 0:
                row(out, STATS_ROW, front(topic, 64), front(t.group, 64), t.backlog, t.in_tps, t.out_tps, t.in_day,
                    t.out_day)  # fmt: skip
    return 0


# -- maintenance ------------------------------------------------------------------------------


def _maintenance(code: int) -> Runner:
    async def run(admin: MQAdmin, args: Args, out: Out) -> int:
        await brokers.maintain(admin, code, args.broker_addr, args.cluster)
        print("success", file=out)
        return 0

    return run


def _broker_status_args(p: Parser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("-b", "--brokerAddr", dest="broker_addr", help="broker address ip:port (master or slave)")
    which.add_argument("-c", "--clusterName", dest="cluster", help="every master and slave of this cluster")


def _leadership_transfer_args(p: Parser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", required=True, help="any member's broker address")
    p.add_argument("-t", "--transfereeId", dest="transferee", help="dLegerSelfId of the new leader")


def _cluster_list_args(p: Parser) -> None:
    p.add_argument("-m", "--moreStats", dest="more_stats", action="store_true", help="message totals")
    p.add_argument("-c", "--clusterName", dest="cluster", help="only this cluster")
    p.add_argument("-i", "--interval", type=o.seconds, help="print again every this many seconds, until Ctrl-C")


def _ha_status_args(p: Parser) -> None:
    o.broker_or_cluster(p)
    o.interval(p)


def _update_broker_config_args(p: Parser) -> None:
    o.broker_or_cluster(p)
    p.add_argument("-a", "--updateAllBroker", dest="update_all", type=o.boolean, default=False,
                   help="true: slaves of the cluster too")  # fmt: skip
    o.key_value(p)


def _broker_consume_stats_args(p: Parser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", required=True)
    p.add_argument("-t", "--timeoutMillis", dest="timeout_ms", type=int, default=50000)
    p.add_argument("-l", "--level", type=int, default=0, help="print only queues at least this far behind")
    p.add_argument("-o", "--order", type=o.boolean, default=False, help="true: only orderly groups")


def _stats_all_args(p: Parser) -> None:
    p.add_argument("-a", "--activeTopic", dest="active", action="store_true", help="print active topics only")
    p.add_argument("-t", "--topic", help="print this topic only")


COMMANDS: Commands = {
    "clusterList": ("list brokers with their load", cluster_list, _cluster_list_args),
    "brokerStatus": ("print a broker's runtime figures", broker_status, _broker_status_args),
    "haStatus": ("replication status: a master's slaves or a slave's master", ha_status, _ha_status_args),
    "leadershipTransfer": (
        "hand a DLedger group's leadership to a member",
        leadership_transfer,
        _leadership_transfer_args,
    ),
    "getBrokerConfig": ("print brokers' settings", get_broker_config, o.broker_or_cluster),
    "updateBrokerConfig": ("change a setting of running brokers", update_broker_config, _update_broker_config_args),
    "brokerConsumeStats": ("every group's progress on one broker", broker_consume_stats, _broker_consume_stats_args),
    "cleanExpiredCQ": (
        "drop consume queues of deleted topics",
        _maintenance(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE),
        o.broker_or_cluster,
    ),
    "cleanUnusedTopic": (
        "drop consume queues of unused topics",
        _maintenance(RequestCode.CLEAN_UNUSED_TOPIC),
        o.broker_or_cluster,
    ),
    "deleteExpiredCommitLog": (
        "delete expired CommitLog files now",
        _maintenance(RequestCode.DELETE_EXPIRED_COMMITLOG),
        o.broker_or_cluster,
    ),
    "statsAll": ("every topic's and group's TPS and 24-hour counts", stats_all, _stats_all_args),
}

"""mqadmin's send probes: sendMsgStatus, checkMsgSendRT, clusterRT."""

from __future__ import annotations

import trio

from rmq.admin import messages, probes
from rmq.client import Message
from rmq.client.admin import MQAdmin

from . import options as o
from .options import Args, Commands, Parser
from .output import Out, java_bool, row

RT_ROW = "{:<32}  {:<4}  {:<20}    {}"
CLUSTER_RT = "{:<24}  {:<24}  {:<4}  {:<8}  {:<8}"


async def send_msg_status(admin: MQAdmin, args: Args, out: Out) -> int:
    body = probes.random_body(args.message_size)
    async with messages.admin_producer(admin) as producer:
        for _ in range(args.count):
            seconds, result = await probes.timed_send(producer, Message(args.broker_name, body))
            print(f"rt={int(seconds * 1000)}ms, SendResult={result}", file=out)
    return 0


async def check_msg_send_rt(admin: MQAdmin, args: Args, out: Out) -> int:
    body = b"x" * args.size
    total = 0.0
    row(out, RT_ROW, "#Broker Name", "#QID", "#Send Result", "#RT")
    async with messages.admin_producer(admin) as producer:
        for _ in range(args.amount):
            seconds, result = await probes.try_send(producer, Message(args.topic, body))
            mq = result.message_queue if result is not None else None
            rt = seconds * 1000
            total += rt
            ok = result is not None
            row(out, RT_ROW, mq.broker_name if mq else "", mq.queue_id if mq else "", java_bool(ok), f"{rt:.0f}")
    print(f"Avg RT: {total / max(args.amount, 1):.2f}", file=out)
    return 0


async def cluster_rt(admin: MQAdmin, args: Args, out: Out) -> int:
    """Sends `-a` messages to each master's broker-name topic, `-i` seconds apart when
    given more than once (`-c` limits it to one cluster)."""
    info = await admin.cluster_info()
    clusters = [args.cluster] if args.cluster else sorted(info.clusters)
    body = b"x" * args.size
    row(out, CLUSTER_RT, "#Cluster Name", "#Broker Name", "#RT", "#successCount", "#failCount")
    async with messages.admin_producer(admin) as producer:
        for cluster in clusters:
            for name, _ in info.masters(cluster):
                rt = await probes.broker_rt(producer, name, body, args.amount)
                row(out, CLUSTER_RT, cluster, name, f"{rt.rt_ms:.2f}", rt.ok, rt.failed)
                if args.interval:
                    await trio.sleep(args.interval)
    return 0


def _send_status_args(p: Parser) -> None:
    o.broker_name(p)
    p.add_argument("-s", "--messageSize", dest="message_size", type=int, default=128)
    p.add_argument("-c", "--count", type=int, default=50)


def _send_rt_args(p: Parser) -> None:
    o.topic(p)
    p.add_argument("-a", "--amount", type=int, default=100)
    p.add_argument("-s", "--size", type=int, default=128)


def _cluster_rt_args(p: Parser) -> None:
    p.add_argument("-a", "--amount", type=int, default=100)
    p.add_argument("-s", "--size", type=int, default=128)
    p.add_argument("-c", "--cluster")
    p.add_argument("-i", "--interval", type=int, default=0, help="seconds to wait between brokers")
    p.add_argument("-p", "--print log", dest="print_log", type=o.boolean, default=False)
    p.add_argument("-m", "--machine room", dest="machine_room", default="noname")


COMMANDS: Commands = {
    "sendMsgStatus": ("send probe messages to a broker", o.checked(send_msg_status), _send_status_args),
    "checkMsgSendRT": ("send probe messages to a topic, with RT", o.checked(check_msg_send_rt), _send_rt_args),
    "clusterRT": ("send RT of every master", o.checked(cluster_rt), _cluster_rt_args),
}

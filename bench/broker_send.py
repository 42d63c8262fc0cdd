"""The broker's CPU per plain send, in one process, without a producer or a socket.

    python bench/broker_send.py                        # 64 in flight, 1 KiB, ASYNC_FLUSH
    python bench/broker_send.py --window 1 --flush SYNC_FLUSH

A broker (`BrokerController`, no name server) runs in this process; a connection of its
dispatcher is fed over an in-memory stream with SEND_MESSAGE_V2 frames as our producer encodes
them (UNIQ_KEY per message, a single queue), `--window` of them at a time, and the answers
are counted by their length prefixes. The frames are encoded before the clock starts, so the
process CPU time per message (`time.process_time`, the broker's flusher and reput included)
is the broker's share of a plain send, less the kernel's socket work: what `send_profile.py`
measures with a producer process beside it, at a fraction of its noise on a shared machine.
Run it for two trees in alternation (A B A B) to compare them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

import trio
import trio.testing

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rmq.broker.config import BrokerConfig  # noqa: E402
from rmq.broker.controller import BrokerController  # noqa: E402
from rmq.broker.processors import build_dispatcher  # noqa: E402
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode  # noqa: E402
from rmq.protocol import properties as P  # noqa: E402
from rmq.protocol.headers import V2_WRITERS, HeaderCommand, SendMessageRequestHeader  # noqa: E402
from rmq.remoting.connection import Connection  # noqa: E402
from rmq.remoting.stages.codec import CommandStream  # noqa: E402

TOPIC = "BenchTopic"
_LENGTH = struct.Struct(">i")


def frames(count: int, size: int) -> list[bytes]:
    body = b"x" * size
    out = []
    for n in range(count):
        header = SendMessageRequestHeader(
            producer_group="BenchPG", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4, queue_id=0,
            sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
            properties=P.encode_properties({P.UNIQ_KEY: f"7F00000100002A9F0000{n:012X}", P.WAIT: "true"}),
            reconsume_times=0, unit_mode=False, batch=False,
        )  # fmt: skip
        command = HeaderCommand.make(RequestCode.SEND_MESSAGE_V2, header, body, writers=V2_WRITERS)
        command.opaque = n
        out.append(command.encode())
    return out


async def count_frames(stream: trio.abc.ReceiveStream, want: int, buf: bytearray, check: bool = False) -> None:
    """Read until `want` whole frames came (what is left of a frame stays in `buf`); with
    `check`, each must answer SUCCESS."""
    got = 0
    while got < want:
        data = await stream.receive_some(1 << 20)
        if not data:
            raise SystemExit("the broker closed the connection")
        buf += data
        pos = 0
        while len(buf) - pos >= 4:
            (length,) = _LENGTH.unpack_from(buf, pos)
            if len(buf) - pos - 4 < length:
                break
            if check:
                answer = RemotingCommand.decode(bytes(buf[pos + 4 : pos + 4 + length]))
                if answer.code != ResponseCode.SUCCESS:
                    raise SystemExit(f"a send was answered {answer.code}: {answer.remark}")
            pos += 4 + length
            got += 1
        del buf[:pos]
    if got != want:
        raise SystemExit(f"{got} answers for {want} sends")


async def measure(args: argparse.Namespace, store: str) -> list[float]:
    config = BrokerConfig.from_properties(
        {
            "brokerClusterName": "Bench", "brokerName": "bench", "brokerIP1": "127.0.0.1",
            "bindAddress": "127.0.0.1", "listenPort": "0", "storePathRootDir": store,
            "flushDiskType": args.flush, "vipChannelEnable": "false", **dict(c.split("=", 1) for c in args.conf),
        },
        environ={},
    )  # fmt: skip
    todo = frames(args.messages * (args.rounds + 1), args.size)
    async with trio.open_nursery() as nursery:
        broker = BrokerController(config)
        await nursery.start(broker.serve)
        broker.parts.topics.create_if_absent(TOPIC, 1, 6)
        left, right = trio.testing.memory_stream_pair()
        conn = Connection(
            CommandStream(right), build_dispatcher(broker.parts, broker.schedule, broker.transactions),
            remote_address="127.0.0.1:50000", local_address="127.0.0.1:10911",
        )  # fmt: skip
        await nursery.start(conn.run)
        buf = bytearray()
        window = args.window
        per_msg = []
        for r in range(args.rounds + 1):  # the first warms up
            chunk = todo[r * args.messages : (r + 1) * args.messages]
            t0 = time.process_time()
            for at in range(0, len(chunk), window):
                part = chunk[at : at + window]
                await left.send_all(b"".join(part))
                await count_frames(left, len(part), buf, check=not r)
            if r:
                per_msg.append((time.process_time() - t0) / len(chunk) * 1e6)
        stored = broker.parts.message_store.get_max_offset_in_queue(TOPIC, 0)
        if stored != len(todo):
            raise SystemExit(f"{stored} messages stored for {len(todo)} sent")
        conn.close()
        nursery.cancel_scope.cancel()
    return per_msg


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--window", type=int, default=64, help="sends written at once (S2: 64)")
    p.add_argument("--size", type=int, default=1024, help="body bytes")
    p.add_argument("--messages", type=int, default=20_000, help="messages per round")
    p.add_argument("--rounds", type=int, default=5, help="measured rounds (after one to warm up)")
    p.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a broker.conf line")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rmq-broker-send-") as store:
        per_msg = trio.run(measure, args, store)
    print(
        f"broker CPU per send: median {statistics.median(per_msg):.1f} µs, min {min(per_msg):.1f} "
        f"({', '.join(f'{v:.1f}' for v in per_msg)}); window {args.window}, {args.size} B, {args.flush}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

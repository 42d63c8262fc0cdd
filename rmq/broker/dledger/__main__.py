"""`python -m rmq.broker.dledger --self n0 --peers "n0-127.0.0.1:40911;n1-...;n2-..." --store DIR`

One member of a DLedger group as its own process (a replicated log, no broker on top yet).
Clients append with APPEND (50001) and read the state with METADATA (50000). SIGTERM or
Ctrl-C stops it cleanly.
"""

from __future__ import annotations

import argparse
import logging
import sys

import trio

from rmq.broker.config import parse_dledger_peers as parse_peers
from rmq.dledger.node import DLedgerNode, NodeConfig
from rmq.lifetime import until_signalled
from rmq.raft.core import RaftConfig

log = logging.getLogger("rmq.broker.dledger")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rmq.broker.dledger", description=__doc__.splitlines()[0])
    p.add_argument("--self", dest="self_id", required=True, help="dLegerSelfId, e.g. n0")
    p.add_argument("--peers", required=True, help='dLegerPeers, "n0-host:port;n1-host:port;n2-host:port"')
    p.add_argument("--store", required=True, help="store root (the log goes to <store>/dledger-<self>/)")
    p.add_argument("--group", default="default", help="dLegerGroup")
    p.add_argument("--election-timeout-ms", type=int, default=3000)
    p.add_argument("--heartbeat-ms", type=int, default=1000)
    p.add_argument("--log-level", default="INFO")
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)-7s %(name)s - %(message)s")
    raft = RaftConfig(
        election_timeout_ms=args.election_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        push_timeout_ms=args.heartbeat_ms,
    )
    try:
        config = NodeConfig(args.self_id, parse_peers(args.peers), args.store, group=args.group, raft=raft)
    except ValueError as exc:
        print(f"dledger: {exc}", file=sys.stderr)
        return 2

    async def run() -> None:
        async with until_signalled(log) as member:
            node = await member.nursery.start(DLedgerNode(config).serve)
            print(f"DLedger node {config.self_id} of {config.group} boot success on port {node.port}", flush=True)
            await member.wait()
            member.cancel()

    trio.run(run)
    return 0


if __name__ == "__main__":
    sys.exit(main())

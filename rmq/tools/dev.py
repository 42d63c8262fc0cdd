"""`rmq dev`: a name server and a broker in one process, store in a local folder.

For a newcomer's first minute and for embedding: the same objects tests start, in one
Trio run. Ctrl-C (or SIGTERM) stops both cleanly.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

import trio

from rmq.broker.config import BrokerConfig, ConfigError
from rmq.broker.controller import BrokerController
from rmq.namesrv import NamesrvConfig, NamesrvServer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rmq dev", description="Run a name server and a broker in one process.")
    parser.add_argument("--store", default="store", help="store root directory (default ./store)")
    parser.add_argument("--host", default="127.0.0.1", help="address both servers listen on (default 127.0.0.1)")
    parser.add_argument("--namesrv-port", type=int, default=9876, help="default 9876")
    parser.add_argument("--broker-port", type=int, default=10911, help="default 10911")
    parser.add_argument("--broker-name", default="broker-a")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser


async def run(args: argparse.Namespace) -> None:
    store = Path(args.store).resolve()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        namesrv_config = NamesrvConfig(
            listen_host=args.host,
            listen_port=args.namesrv_port,
            kv_config_path=str(store / "namesrv" / "kvConfig.json"),
        )
        async with NamesrvServer(namesrv_config) as namesrv:
            config = BrokerConfig.load(
                None,
                {
                    "namesrvAddr": namesrv.address,
                    "storePathRootDir": str(store),
                    "listenPort": str(args.broker_port),
                    "bindAddress": args.host,
                    "brokerIP1": "127.0.0.1" if args.host in ("127.0.0.1", "0.0.0.0") else args.host,
                    "brokerName": args.broker_name,
                },
            )
            async with trio.open_nursery() as nursery:
                broker = await nursery.start(BrokerController(config).serve)
                print(f"The Name Server boot success. listening on {namesrv.address}", flush=True)
                print(f"The broker[{config.broker_name}, {broker.address}] boot success. store: {store}", flush=True)
                print(f"export NAMESRV_ADDR={namesrv.address}", flush=True)
                async for _ in signals:
                    break
                broker.shutdown()
                await broker.wait_stopped()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)-7s %(name)s - %(message)s")
    try:
        trio.run(run, args)
    except ConfigError as exc:
        print(f"rmq dev: bad configuration: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"rmq dev: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0

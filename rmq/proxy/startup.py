"""`rmq proxy` / `mqproxy`: RocketMQ 5's gRPC proxy in cluster mode, until SIGINT or SIGTERM.

Settings come from defaults, then rmq-proxy.json (`-pc`, as Java's mqproxy), then the
command line (`-n`, `--port`). The listen line goes to stdout once the port is bound.
"""

from __future__ import annotations

import argparse
import logging
import sys

import trio

from rmq.lifetime import exit_status, until_signalled

from .config import LOCAL, ProxyConfig
from .server import ProxyServer

log = logging.getLogger("rmq.proxy")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqproxy", description="Run an rmq gRPC proxy (RocketMQ's mqproxy).")
    parser.add_argument("-pc", "--proxyConfigPath", dest="config", metavar="FILE", help="rmq-proxy.json")
    parser.add_argument("-n", "--namesrvAddr", metavar="ADDR", help="name servers, host:port;host:port")
    parser.add_argument("--port", type=int, help="gRPC port (grpcServerPort, default 8081; 0 picks a free one)")
    parser.add_argument("--host", default="0.0.0.0", help="listen address (default 0.0.0.0)")
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="default INFO"
    )
    return parser


def load_config(args: argparse.Namespace) -> ProxyConfig:
    config = ProxyConfig.load(args.config) if args.config else ProxyConfig.from_mapping({})
    for key in config.unknown:
        log.info("%s: not read by rmq", key)
    if args.namesrvAddr:
        config.namesrv_addr = args.namesrvAddr
    if args.port is not None:
        config.grpc_server_port = args.port
    if config.proxy_mode == LOCAL:
        raise ValueError("proxyMode LOCAL: start the broker with --enable-proxy instead")
    if not config.namesrv():
        raise ValueError("no name server: give -n, namesrvAddr or $NAMESRV_ADDR")
    return config


async def serve_until_signalled(config: ProxyConfig, host: str) -> None:
    async with until_signalled(log) as run:
        server = ProxyServer(config, host)
        await run.nursery.start(server.serve)
        print(f"rmq proxy boot success, gRPC on {host}:{server.port}, name servers {config.namesrv_addr}", flush=True)
        await run.wait()
        server.shutdown()
    log.info("proxy stopped")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)-7s %(name)s - %(message)s", stream=sys.stderr
    )
    return exit_status(
        "mqproxy", lambda: trio.run(serve_until_signalled, load_config(args), args.host), bad_config=(ValueError,)
    )


if __name__ == "__main__":
    sys.exit(main())

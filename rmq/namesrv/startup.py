"""`rmq namesrv` / `mqnamesrv`: run one name server until SIGINT or SIGTERM.

Settings come from defaults, then a RocketMQ properties file (`-c`), then the command
line. As RocketMQ's mqnamesrv, `-p` prints every setting as `key=value` lines and exits 0
without starting, and `-n` is accepted and ignored; `-p PORT` (a number after it) is the
older spelling of `--port PORT`. The listen line goes to stdout once the port is bound;
logs go to stderr. A pid
file `namesrv-<port>.pid` (under ~/.rmq/run or $RMQ_RUN_DIR) lets `mqshutdown
namesrv` find the process; it is removed on exit. The first signal shuts down
gracefully (in-flight requests finish); a second one stops at once.

`rmq namesrv` comes here through rmq/tools/namesrv.py, which with enableControllerInNamesrv=true
builds a controller member and hands it to `serve_until_signalled` to run beside the name
server (this package does not import the controller).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Sequence
from typing import Any, Protocol

import trio

from rmq.lifetime import exit_status, until_signalled
from rmq.protocol import javaprops as properties
from rmq.rocketmq_keys import ConfigError
from rmq.rundir import pid_file

from .config import NamesrvConfig, report_unused
from .server import NamesrvServer

log = logging.getLogger("rmq.namesrv")

_PRINT = object()  # what a bare -p stores; -p with a number stores the number (a port)


class Beside(Protocol):
    """A server run in the name server's process (the controller member)."""

    async def serve(self, *, task_status: Any = ...) -> None: ...

    async def aclose(self) -> None: ...


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqnamesrv", description="Run an rmq name server (RocketMQ's mqnamesrv).")
    parser.add_argument(
        "-c",
        "--configFile",
        "--config",
        dest="config",
        metavar="FILE",
        help="RocketMQ properties file (listenPort, kvConfigPath, orderMessageEnable, ...)",
    )
    parser.add_argument(
        "-p",
        dest="p",
        nargs="?",
        const=_PRINT,
        type=int,
        metavar="PORT",
        help="print every setting and exit, as RocketMQ's -p; with a number, the same as --port",
    )
    parser.add_argument("--printConfigItem", action="store_true", help="print every setting and exit")
    parser.add_argument("-n", "--namesrvAddr", metavar="ADDR", help="accepted and ignored, as by RocketMQ's mqnamesrv")
    parser.add_argument("--port", type=int, help="listen port (default 9876; 0 picks a free one)")
    parser.add_argument("--host", help="listen address (default 0.0.0.0)")
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="default INFO"
    )
    return parser


def load_config(args: argparse.Namespace) -> NamesrvConfig:
    """Defaults, then the -c file, then command-line flags. Raises ConfigError or OSError."""
    config = NamesrvConfig()
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            text = f.read()
        try:
            config, unknown = config.with_properties(properties.parse(text))
        except ConfigError as exc:
            raise ConfigError(exc.key, f"{exc.message} (in {args.config})") from None
        report_unused(unknown, args.config, controller_beside=config.enable_controller_in_namesrv)
    if args.namesrvAddr is not None:
        log.info("-n %s ignored: a name server does not use name server addresses", args.namesrvAddr)
    flags = {}
    port = args.port if args.port is not None else args.p if args.p is not _PRINT else None
    if port is not None:
        flags["listenPort"] = str(port)
    if args.host is not None:
        flags["bindAddress"] = args.host
    config, _ = config.with_properties(flags)
    return config


async def serve_until_signalled(config: NamesrvConfig, beside: Sequence[tuple[Beside, str]] = ()) -> None:
    """Serve until SIGINT or SIGTERM, with each of `beside` (a server and its boot line)
    started after the name server and stopped before it."""
    async with until_signalled(log) as run:
        server = NamesrvServer(config)
        await run.nursery.start(server.serve)
        for companion, _ in beside:
            await run.nursery.start(companion.serve)
        assert server.port is not None
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(pid_file("namesrv", server.port))
            except OSError as exc:
                log.warning("cannot write the pid file (%s): mqshutdown will not find this name server", exc)
            print(f"The Name Server boot success. serializeType=JSON, listening on {server.listen_address}", flush=True)
            for _, tip in beside:
                print(tip, flush=True)
            await run.wait()

            async def stopping() -> None:
                for companion, _ in beside:
                    await companion.aclose()
                await server.aclose()

            await run.stop(stopping)
    log.info("name server stopped")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, and logging set up as it asks."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)-7s %(name)s - %(message)s", stream=sys.stderr
    )
    return args


def printing(args: argparse.Namespace) -> bool:
    """-p (or --printConfigItem): print the settings and exit."""
    return bool(args.printConfigItem or args.p is _PRINT)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return exit_status("mqnamesrv", lambda: run(args, load_config(args)), bad_config=(ConfigError,))


def run(args: argparse.Namespace, config: NamesrvConfig) -> None:
    """Print the settings (-p), or serve until signalled."""
    if config.enable_controller_in_namesrv:
        raise ConfigError(
            "enableControllerInNamesrv",
            "the name server with its controller is started by `rmq namesrv` (mqnamesrv), which assembles the two",
        )
    if printing(args):
        for key, value in config.to_properties().items():
            print(f"{key}={value}")
        return
    trio.run(serve_until_signalled, config)


if __name__ == "__main__":
    sys.exit(main())

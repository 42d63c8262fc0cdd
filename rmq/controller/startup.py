"""`rmq controller` / `mqcontroller`: run one controller member until SIGINT or SIGTERM.

As RocketMQ's ControllerStartup: `-c FILE` reads the settings from a properties file and
`-p` prints every setting as `key=value` lines and exits 0 without starting. The boot line
goes to stdout once the member serves; logs go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Collection

import trio

from rmq import rocketmq_keys
from rmq.lifetime import exit_status, until_signalled
from rmq.protocol import javaprops as properties
from rmq.rocketmq_keys import ConfigError

from .config import ControllerConfig, report_unused
from .server import ControllerServer

log = logging.getLogger("rmq.controller")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mqcontroller", description="Run an rmq controller (RocketMQ's mqcontroller)."
    )
    parser.add_argument(
        "-c", "--configFile", dest="config", metavar="FILE",
        help="properties file (controllerDLegerGroup, controllerDLegerPeers, controllerDLegerSelfId, ...)",
    )  # fmt: skip
    parser.add_argument("-p", "--printConfigItem", action="store_true", help="print every setting and exit")
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="default INFO"
    )
    return parser


def load_config(path: str | None, *, namesrv_keys: Collection[str] | None = None) -> ControllerConfig:
    """Defaults, then the file. Raises ConfigError or OSError.

    `namesrv_keys`: the file is that of a name server acting on these keys, which the member
    runs in (enableControllerInNamesrv); the name server reports other keys, this member only
    the controller's own that neither acts on."""
    config = ControllerConfig()
    if path:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            config, unknown = config.with_properties(properties.parse(text))
        except ConfigError as exc:
            raise ConfigError(exc.key, f"{exc.message} (in {path})") from None
        if namesrv_keys is not None:
            unknown = [k for k in unknown if k in rocketmq_keys.CONTROLLER and k not in namesrv_keys]
        report_unused(unknown, path)
    return config


async def serve_until_signalled(config: ControllerConfig) -> None:
    async with until_signalled(log) as run:
        server = ControllerServer(config)
        await run.nursery.start(server.serve)
        print(
            f"The Controller Server boot success. serializeType=JSON, {config.self_id} of {config.group} "
            f"listening on {config.address}",
            flush=True,
        )
        await run.wait()
        await run.stop(server.aclose)
    log.info("controller stopped")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)-7s %(name)s - %(message)s", stream=sys.stderr
    )
    return exit_status("mqcontroller", lambda: _run(args), bad_config=(ConfigError,))


def _run(args: argparse.Namespace) -> None:
    config = load_config(args.config)
    if args.printConfigItem:
        for key, value in config.to_properties().items():
            print(f"{key}={value}")
        return
    config.validate()
    trio.run(serve_until_signalled, config)


if __name__ == "__main__":
    sys.exit(main())

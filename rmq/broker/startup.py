"""`rmq broker` / `mqbroker`: run one broker until SIGINT or SIGTERM.

Options as RocketMQ's mqbroker: `-c broker.conf`, `-n "ip:port;ip:port"` (wins over the
file, which wins over $NAMESRV_ADDR), `-p` prints every setting as `key=value` lines and
exits 0 without starting, `-m` prints the important ones likewise (both show the values the
broker would start with, after the corrections RocketMQ also makes); `--store DIR` sets
storePathRootDir. The boot line goes to
stdout; logs go to stderr. A pid file `broker-<port>.pid` (under ~/.rmq/run or
$RMQ_RUN_DIR) lets `mqshutdown broker` find the process. The first signal stops cleanly
(unregister, persist, close the store); a second one stops at once.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

import trio

from rmq.lifetime import exit_status, until_signalled
from rmq.rundir import pid_file
from rmq.store import StoreError

from .config import BrokerConfig, ConfigError
from .controller import BrokerController

log = logging.getLogger("rmq.broker")

# A server that runs beside the broker in its process (the gRPC proxy in local mode): made
# from the running broker, started after it, stopped before it. Given by the layer above.
Companion = Callable[[BrokerController], Any]

# What `-m` prints: the settings RocketMQ marks @ImportantField (BrokerConfig, then
# MessageStoreConfig, in RocketMQ's order; listenPort as in 5.x) that this broker has.
IMPORTANT_KEYS = (
    "namesrvAddr",
    "listenPort",
    "brokerIP1",
    "brokerIP2",
    "brokerName",
    "brokerClusterName",
    "brokerId",
    "brokerPermission",
    "defaultTopicQueueNums",
    "autoCreateTopicEnable",
    "clusterTopicEnable",
    "autoCreateSubscriptionGroup",
    "msgTraceTopicName",
    "traceTopicEnable",
    "rejectTransactionMessage",
    "transactionTimeOut",
    "transactionCheckMax",
    "transactionCheckInterval",
    "aclEnable",
    "storeReplyMessageEnable",
    "storePathRootDir",
    "storePathCommitLog",
    "flushIntervalCommitLog",
    "flushIntervalConsumeQueue",
    "deleteWhen",
    "diskMaxUsedSpaceRatio",
    "fileReservedTime",
    "maxTransferBytesOnMessageInMemory",
    "maxTransferCountOnMessageInMemory",
    "accessMessageInMemoryMaxRatio",
    "messageIndexEnable",
    "maxHashSlotNum",
    "maxIndexNum",
    "haListenPort",
    "haSendHeartbeatInterval",
    "haMasterAddress",
    "haSlaveFallbehindMax",
    "brokerRole",
    "flushDiskType",
    "syncFlushTimeout",
    "cleanFileForciblyEnable",
    "warmMapedFileEnable",
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqbroker", description="Run an rmq broker (RocketMQ's mqbroker).")
    parser.add_argument("-c", "--configFile", metavar="FILE", help="broker.conf (RocketMQ properties keys)")
    parser.add_argument("-n", "--namesrvAddr", metavar="ADDR", help='name servers, "ip:port;ip:port"')
    parser.add_argument("-p", "--printConfigItem", action="store_true", help="print every setting and exit")
    parser.add_argument("-m", "--printImportantConfig", action="store_true", help="print the main settings and exit")
    parser.add_argument("--store", metavar="DIR", help="store root directory (storePathRootDir)")
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="default INFO"
    )
    return parser


def load_config(args: argparse.Namespace) -> BrokerConfig:
    """Defaults < $NAMESRV_ADDR < the -c file < command-line options. Raises ConfigError."""
    overrides = {}
    if args.namesrvAddr:
        overrides["namesrvAddr"] = args.namesrvAddr
    if args.store:
        overrides["storePathRootDir"] = args.store
    return BrokerConfig.load(args.configFile, overrides)


async def serve_until_signalled(config: BrokerConfig, companions: Sequence[Companion] = ()) -> None:
    async with until_signalled(log) as run:
        broker = BrokerController(config)
        await run.nursery.start(broker.serve)
        beside = [make(broker) for make in companions]
        for server in beside:
            await run.nursery.start(server.serve)
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(pid_file("broker", broker.port))
            except OSError as exc:
                log.warning("cannot write the pid file (%s): mqshutdown will not find this broker", exc)
            tip = f"The broker[{config.broker_name}, {broker.address}] boot success. serializeType=JSON"
            if config.namesrv_addr:
                tip += f" and name server is {';'.join(config.namesrv_addr)}"
            print(tip, flush=True)
            print(f"The store path is {config.store_path_root_dir}", flush=True)
            # What start-up made lives as long as the process: frozen, a full collection (set off
            # by a burst of new objects, a big heartbeat) no longer walks it on the event loop
            # (30-45 ms a collection, measured, before).
            gc.collect()
            gc.freeze()
            await run.wait()
            for server in beside:
                server.shutdown()
            broker.shutdown()
            await run.stop(broker.wait_stopped)


def main(argv: list[str] | None = None, companions: Sequence[Companion] = ()) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)-7s %(name)s - %(message)s", stream=sys.stderr
    )
    try:
        config = load_config(args)
    except ConfigError as exc:
        print(f"mqbroker: bad configuration: {exc}", file=sys.stderr)
        return 2
    if args.printConfigItem or args.printImportantConfig:
        props = config.to_properties()
        keys = props if args.printConfigItem else IMPORTANT_KEYS
        for key in keys:
            print(f"{key}={props[key]}")
        return 0
    return exit_status(
        "mqbroker",
        lambda: trio.run(serve_until_signalled, config, companions),
        cannot_start=(OSError, StoreError, ValueError),
    )


if __name__ == "__main__":
    sys.exit(main())

"""The `rmq` command and the RocketMQ-named console scripts.

Each subcommand hands the rest of the command line to its own module's `main`, imported
only when chosen, so `rmq namesrv` does not pay for Spark or the client.

A command whose reader goes away (`mqadmin topicList | head -1`) ends as Unix tools do: no
traceback, killed by SIGPIPE (status 141 in the shell), so a `pipefail` script can tell a
closed pipe from mqadmin's exit 1 for a failed command. Python ignores SIGPIPE so that
sockets report EPIPE as errors; it is restored only at that end, never while servers run.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys

# subcommand → (module, function, one-line help)
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "namesrv": ("rmq.tools.cli", "_namesrv", "run a name server (like mqnamesrv)"),
    "broker": ("rmq.tools.cli", "_broker", "run a broker (like mqbroker)"),
    "controller": ("rmq.controller.startup", "main", "run a controller member (like mqcontroller)"),
    "proxy": ("rmq.tools.cli", "_proxy", "run a gRPC proxy for RocketMQ 5.x clients (like mqproxy)"),
    "dev": ("rmq.tools.dev", "main", "run a name server and a broker in one process, for a first minute"),
    "admin": ("rmq.tools.admin", "main", "administer topics, groups, offsets and messages (like mqadmin)"),
    "shutdown": ("rmq.tools.shutdown", "main", "stop a running name server or broker (like mqshutdown)"),
    "quickstart": ("rmq.tools.cli", "_quickstart", "the quickstart producer and consumer (tools.sh examples)"),
    "bench": ("rmq.tools.cli", "_bench", "benchmark producer and consumer (benchmark/*.sh)"),
    "export": ("rmq.tools.cli", "_export", "export topics or a store to Parquet with Spark"),
    "fuzz": ("rmq.tools.fuzz", "main", "send hostile requests to a name server, broker or gRPC proxy"),
    "dashboard": ("rmq.dashboard.app", "main", "a web console for a cluster, like rocketmq-dashboard"),
}


def _usage() -> str:
    lines = ["usage: rmq <command> [options]", "", "commands:"]
    lines += [f"  {name:<11} {help_}" for name, (_, _, help_) in _COMMANDS.items()]
    lines += ["", "Run `rmq <command> --help` for a command's options."]
    return "\n".join(lines)


def _call(module: str, func: str, argv: list[str]) -> int:
    fn = getattr(importlib.import_module(module), func)
    return int(fn(argv) or 0)


def _pair(argv: list[str], module: str, what: str) -> int:
    """`rmq quickstart producer ...` style: the first word picks producer_main / consumer_main."""
    if not argv or argv[0] not in ("producer", "consumer"):
        print(f"usage: rmq {what} producer|consumer [options]", file=sys.stderr)
        return 2
    return _call(module, f"{argv[0]}_main", argv[1:])


def _namesrv(argv: list[str]) -> int:
    from rmq import metrics  # metricsExporterType=PROM: the servers do not import their exporters

    metrics.install_namesrv()
    return _call("rmq.tools.namesrv", "main", argv)  # with enableControllerInNamesrv, a controller beside it


def _broker(argv: list[str]) -> int:
    from rmq import metrics

    metrics.install_broker()
    if any(a in ("--enable-proxy", "--enableProxy") for a in argv):
        metrics.install_proxy()
        return _call("rmq.proxy.local", "main", argv)  # local mode: the gRPC proxy in the broker's process
    return _call("rmq.broker.startup", "main", argv)


def _proxy(argv: list[str]) -> int:
    from rmq import metrics

    metrics.install_proxy()
    return _call("rmq.proxy.startup", "main", argv)


def _quickstart(argv: list[str]) -> int:
    return _pair(argv, "rmq.tools.quickstart", "quickstart")


def _bench(argv: list[str]) -> int:
    return _pair(argv, "rmq.tools.bench", "bench")


def _export(argv: list[str]) -> int:
    if not argv or argv[0] != "parquet":
        print("usage: rmq export parquet [options]", file=sys.stderr)
        return 2
    return _call("rmq_spark.export", "main", argv[1:])


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(sys.argv[1:] if argv is None else argv)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
    except BaseException as exc:
        if not _closed_pipe(exc):
            raise
        _end_by_sigpipe()
        return 141  # the shell's status for SIGPIPE, where the signal cannot end the process
    return code


def _closed_pipe(exc: BaseException) -> bool:
    """A BrokenPipeError, also inside the ExceptionGroup of a nursery the command ran in."""
    if isinstance(exc, BaseExceptionGroup):
        rest = exc.split(BrokenPipeError)[1]
        return rest is None
    return isinstance(exc, BrokenPipeError)


def _end_by_sigpipe() -> None:
    # stdout to /dev/null, so the interpreter's last flush has nowhere to fail
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)


def _main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        from rmq import __version__

        print(f"rmq {__version__}")
        return 0
    entry = _COMMANDS.get(argv[0])
    if entry is None:
        print(f"rmq: unknown command {argv[0]!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module, func, _ = entry
    return _call(module, func, argv[1:])


def _script(command: str) -> int:
    return main([command, *sys.argv[1:]])


def mqnamesrv() -> int:
    return _script("namesrv")


def mqbroker() -> int:
    return _script("broker")


def mqcontroller() -> int:
    return _script("controller")


def mqproxy() -> int:
    return _script("proxy")


def mqadmin() -> int:
    return _script("admin")


def mqshutdown() -> int:
    return _script("shutdown")


if __name__ == "__main__":
    sys.exit(main())

"""`mqshutdown namesrv|broker`: stop running servers cleanly (SIGTERM, then wait)."""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path

from rmq.rundir import running


def _running(path: Path, pid: int) -> bool:
    """A server is done once it removed its pid file or its process is gone.

    A process that exited but was not yet reaped by its parent (a zombie) still answers
    kill(pid, 0), so the pid file, which the server deletes when it has stopped, decides.
    """
    if not path.exists():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mqshutdown", description="Stop running rmq name servers or brokers.")
    parser.add_argument("kind", choices=["namesrv", "broker"])
    parser.add_argument("--port", type=int, help="only the server listening on this port")
    parser.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for a clean stop (default 15)")
    args = parser.parse_args(argv)

    targets = [
        (path, pid) for path, pid in running(args.kind) if args.port is None or path.stem.endswith(f"-{args.port}")
    ]
    if not targets:
        print(f"No {args.kind} running")
        return 1
    for _, pid in targets:
        print(f"The {args.kind}({pid}) is running...")
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    pending = dict(targets)
    while pending and time.monotonic() < deadline:
        for path, pid in list(pending.items()):
            if not _running(path, pid):
                print(f"Send shutdown request to {args.kind}({pid}) OK")
                del pending[path]
        time.sleep(0.05)
    for pid in pending.values():
        print(f"The {args.kind}({pid}) did not stop within {args.timeout:g} s")
    return 1 if pending else 0

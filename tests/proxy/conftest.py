"""A name server, a broker and a cluster-mode proxy in this process (real sockets on
127.0.0.1), and the official 5.x Python client in child processes (tests/proxy/client5.py).

The client is installed apart by scripts/bootstrap.sh (.cache/rocketmq5): its import name
`rocketmq` is also the C++ client's, which the interop tests use. Tests skip without it (fail in CI).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from rmq.proxy import ProxyConfig, ProxyServer
from tests.client.conftest import Cluster, cluster  # noqa: F401  the fixture

CLIENT5 = Path(__file__).resolve().parents[2] / ".cache" / "rocketmq5"
CHILD = Path(__file__).with_name("client5.py")

# short waits for tests: receives poll 1 s at least, messages may be invisible for 1 s
FAST = {
    "grpcClientConsumerMinLongPollingTimeoutMillis": 500,
    "minInvisibleTimeMillsForRecv": 1000,
}


def require_client5() -> None:
    """Skip without the 5.x client, except in CI, where bootstrap.sh installs it: fail there."""
    if not (CLIENT5 / "rocketmq" / "v5").is_dir():
        why = "the 5.x client is not installed (scripts/bootstrap.sh puts it in .cache/rocketmq5)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


async def run_client(
    endpoint: str, *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Run client5.py; its JSON lines. Fails unless it ended with {"done": true}."""
    require_client5()
    child_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    child_env.update(env or {})
    child_env["PYTHONPATH"] = str(CLIENT5)
    with trio.fail_after(timeout):
        result = await trio.run_process(
            [sys.executable, str(CHILD), endpoint, *args],
            capture_stdout=True,
            capture_stderr=True,
            env=child_env,
            check=False,
        )
    lines = [json.loads(line) for line in result.stdout.decode().splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines or lines[-1] != {"done": True}:
        raise AssertionError(f"client5 {args} exited {result.returncode}: {lines}\n{result.stderr.decode()[-3000:]}")
    return lines[:-1]


@pytest.fixture
async def proxy(cluster: Cluster) -> AsyncIterator[ProxyServer]:  # noqa: F811
    config = ProxyConfig.from_mapping({"namesrvAddr": cluster.namesrv_addr, "grpcServerPort": 0, **FAST})
    async with ProxyServer(config, host="127.0.0.1") as server:
        yield server

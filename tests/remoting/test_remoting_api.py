"""The public API of rmq.remoting, pinned (trio's test_exports style)."""

from __future__ import annotations

import rmq.remoting
import rmq.remoting.testing

PUBLIC = {
    "BUSY_OVERLOAD",
    "BUSY_REJECT",
    "ClientConfig",
    "CommandStream",
    "Connection",
    "ConnectionStatistics",
    "Dispatcher",
    "Later",
    "ProcessFunction",
    "RemotingClient",
    "RemotingConnectError",
    "RemotingError",
    "RemotingSendRequestError",
    "RemotingServer",
    "RemotingTimeoutError",
    "RemotingTooMuchRequestError",
    "RequestContext",
    "RequestProcessor",
    "Route",
    "Sent",
    "ServerConfig",
    "TlsMode",
}
SUBMODULES = {
    "busypoll",
    "abc",
    "client",
    "connection",
    "dispatcher",
    "errors",
    "outbox",
    "server",
    "service",
    "stages",
    "testing",
    "tlsconfig",
}


def test_public_names() -> None:
    # "@py_builtins" and "@pytest_ar": pytest rewrites the asserts of every module of a
    # distribution that registers a pytest plugin, which rmq does (rmq.pytest_plugin).
    names = {n for n in dir(rmq.remoting) if not n.startswith(("_", "@"))}
    assert names - SUBMODULES == PUBLIC


def test_testing_helpers() -> None:
    for name in ("serve_on_loopback", "memory_connection_pair", "raw_peer", "echo"):
        assert callable(getattr(rmq.remoting.testing, name))


def test_error_tree() -> None:
    from rmq.remoting import (
        RemotingConnectError,
        RemotingError,
        RemotingSendRequestError,
        RemotingTimeoutError,
        RemotingTooMuchRequestError,
    )

    for cls in (RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError, RemotingTooMuchRequestError):
        assert issubclass(cls, RemotingError)
    err = RemotingTimeoutError("10.0.0.1:10911", 10, 3.0)
    assert err.address == "10.0.0.1:10911" and "SEND_MESSAGE(10)" in str(err) and "3000 ms" in str(err)
    assert RemotingConnectError("10.0.0.1:9876", "refused").address == "10.0.0.1:9876"


def test_importing_protocol_does_not_pull_in_remoting() -> None:
    import subprocess
    import sys

    code = "import rmq.protocol, sys; assert 'trio' not in sys.modules and 'rmq.remoting' not in sys.modules"
    subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=str(__import__("pathlib").Path(rmq.__file__).parents[1])
    )

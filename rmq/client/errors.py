"""Errors raised by rmq.client: a small tree with wire codes on it (STYLE.md example 8).

    MQClientError                  base of everything the client raises
    ├── MQNoRouteError             no route for a topic from any name server asked
    ├── MQTimeoutError             a broker or name server did not answer in time
    ├── MQConnectError             no usable connection to an address
    ├── MQBrokerError              the broker (or name server) answered with an error code
    └── MQClientStateError         the client is not running (used outside `async with`)

Trio's stream errors, OSError and rmq.remoting's errors never leave rmq.client: they are
translated at the boundary by `translate_remoting_error`. `MQBrokerError.retriable` says
whether a producer may try another broker (aiokafka's `retriable`); the set of codes is
RocketMQ's `retryResponseCodes` (PROTOCOL.md 2.2).
"""

from __future__ import annotations

from collections.abc import Iterable

from rmq.protocol import ResponseCode, code_name
from rmq.remoting.errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)

# DefaultMQProducer.retryResponseCodes: a sync send tries another queue/broker on these.
RETRY_RESPONSE_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)


class MQClientError(Exception):
    """Base of every error rmq.client raises."""


class MQClientStateError(MQClientError):
    """The producer or consumer is not running (not entered, or already closed)."""


class MQNoRouteError(MQClientError):
    """No name server knows a route for `topic`.

    `namesrv_addrs` are the name servers that were asked; `reason` says what they said.
    """

    def __init__(self, topic: str, namesrv_addrs: Iterable[str], reason: str = "") -> None:
        self.topic = topic
        self.namesrv_addrs = tuple(namesrv_addrs)
        text = f"no route info of topic {topic!r} from name servers {list(self.namesrv_addrs)}"
        super().__init__(text + (f": {reason}" if reason else ""))
        self.reason = reason


class MQTimeoutError(MQClientError):
    """`address` did not answer within the time allowed; `elapsed` seconds were spent."""

    def __init__(self, address: str, elapsed: float, what: str = "request") -> None:
        self.address = address
        self.elapsed = elapsed
        super().__init__(f"{what} to {address} timed out after {elapsed * 1000:.0f} ms")


class MQConnectError(MQClientError):
    """No connection to `address` (refused, closed, or too many requests outstanding)."""

    def __init__(self, address: str, reason: str) -> None:
        self.address = address
        self.reason = reason
        super().__init__(f"connection to {address} failed: {reason}")


class MQBrokerError(MQClientError):
    """A peer answered `response_code` with `remark`.

    `retriable` is true for the producer's retry set (another broker may accept the
    message); `address` is the peer that answered.
    """

    def __init__(
        self,
        response_code: int,
        remark: str | None,
        *,
        address: str = "",
        retriable: bool | None = None,
    ) -> None:
        self.response_code = response_code
        self.remark = remark or ""
        self.address = address
        self.retriable = response_code in RETRY_RESPONSE_CODES if retriable is None else retriable
        where = f" from {address}" if address else ""
        super().__init__(f"{code_name(response_code, response=True)}{where}: {self.remark}")


def translate_remoting_error(exc: RemotingError, elapsed: float) -> MQClientError:
    """The client error for a remoting error; `elapsed` is the time the call took."""
    if isinstance(exc, RemotingTimeoutError):
        return MQTimeoutError(exc.address, elapsed)
    if isinstance(exc, RemotingConnectError):
        return MQConnectError(exc.address, exc.reason or str(exc))
    if isinstance(exc, (RemotingSendRequestError, RemotingTooMuchRequestError)):
        return MQConnectError(exc.address, exc.reason)
    return MQConnectError(exc.address, str(exc))


def is_retriable(exc: BaseException) -> bool:
    """Whether a failed send may be tried again on another broker."""
    if isinstance(exc, MQBrokerError):
        return exc.retriable
    return isinstance(exc, (MQTimeoutError, MQConnectError))

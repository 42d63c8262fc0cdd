"""Client configuration: typed objects built once at the edge (DESIGN.md, "configuration is data").

Defaults are RocketMQ 4.9.8's (PROTOCOL.md 7); times are in seconds. Producers and
consumers take these as keyword arguments (`Producer("g", namesrv=..., retry_times=3)`),
typed by ProducerOptions and ConsumerOptions (`**options: Unpack[...]`): editors complete
them and mypy checks them. `build` raises TypeError for an unknown name, as Python does for
an unexpected keyword, and MQClientError for a bad value, before anything starts.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import os
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypedDict, TypeVar

from rmq.protocol.constants import AUTO_CREATE_TOPIC
from rmq.protocol.errors import ProtocolError
from rmq.protocol.message import compress
from rmq.remoting.tlsconfig import TlsClientSettings, TlsConfigError, client_ssl_context

from .errors import MQClientError

C = TypeVar("C", bound="ClientConfig")
_MAY_BE_NEGATIVE = frozenset({"max_reconsume_times"})


class MessageModel(enum.Enum):
    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFromWhere(enum.Enum):
    LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


def tls_context(tls: bool | ssl.SSLContext | TlsClientSettings) -> ssl.SSLContext | None:
    """The context to connect with for a `tls` option; None: plain TCP.

    True verifies the server against the system's CAs. Raises MQClientError when
    TlsClientSettings name a certificate that cannot be loaded."""
    if isinstance(tls, ssl.SSLContext):
        return tls
    if isinstance(tls, TlsClientSettings):
        try:
            return tls.ssl_context()
        except TlsConfigError as exc:
            raise MQClientError(f"TLS: {exc}") from None
    return client_ssl_context() if tls else None


def parse_namesrv(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """Name server addresses from "a:9876;b:9876", a list, or $NAMESRV_ADDR when None."""
    if value is None:
        value = os.environ.get("NAMESRV_ADDR", "")
    items = value.replace(",", ";").split(";") if isinstance(value, str) else list(value)
    addrs = tuple(a.strip() for a in items if a and a.strip())
    if not addrs:
        raise MQClientError("no name server address: pass namesrv=... or set NAMESRV_ADDR")
    for addr in addrs:
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise MQClientError(f"bad name server address {addr!r}: expected host:port")
    return addrs


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """What every client needs (RocketMQ's ClientConfig)."""

    namesrv: tuple[str, ...] = ()
    instance_name: str | None = None  # None: "<pid>#<nanotime>", unique per client
    client_ip: str | None = None  # None: the local address
    unit_name: str | None = None
    request_timeout: float = 3.0  # name server and broker admin calls
    poll_name_server_interval: float = 30.0
    heartbeat_broker_interval: float = 30.0
    # TLS to name servers and brokers: True (the system's CAs), an ssl.SSLContext, or
    # TlsClientSettings (RocketMQ's tls.client.* keys); the server is verified by default
    tls: bool | ssl.SSLContext | TlsClientSettings = False
    access_key: str | None = None  # ACL 1.0: with secret_key, every request is signed (AclClientRPCHook)
    secret_key: str | None = dataclasses.field(default=None, repr=False)
    # µs the process's Trio loops poll for I/O before sleeping (rmq.remoting.busypoll): lower
    # latency at one request in flight for some CPU. Process-wide once set; 0 leaves it alone.
    busy_poll_micros: int = 0

    @classmethod
    def build(cls, namesrv: str | Sequence[str] | None, options: Mapping[str, Any], owner: str = "") -> Self:
        """The config with `options` applied. TypeError names an unknown option (`owner`: the
        class that took it, for the message); MQClientError a bad value."""
        names = {f.name for f in dataclasses.fields(cls)} - {"namesrv"}
        for name in sorted(set(options) - names):
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"{owner or cls.__name__}() got an unexpected keyword argument {name!r}{hint}")
        config = cls(namesrv=parse_namesrv(namesrv), **options)
        config.validate()
        return config

    def validate(self) -> None:
        for f in dataclasses.fields(self):
            if f.name in _MAY_BE_NEGATIVE:
                continue
            value = getattr(self, f.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
                raise MQClientError(f"option {f.name} must not be negative, got {value}")
        if not isinstance(self.tls, (bool, ssl.SSLContext, TlsClientSettings)):
            raise MQClientError(f"option tls must be a bool, an ssl.SSLContext or TlsClientSettings, not {self.tls!r}")
        if (self.access_key is None) != (self.secret_key is None):
            raise MQClientError("access_key and secret_key go together: pass both or neither")
        if self.access_key is not None and not (self.access_key and self.secret_key):
            raise MQClientError("access_key and secret_key must not be empty")

    @property
    def credentials(self) -> tuple[str, str] | None:
        """(access_key, secret_key) when requests are to be signed, else None."""
        if self.access_key and self.secret_key:
            return self.access_key, self.secret_key
        return None


@dataclass(frozen=True, slots=True)
class ProducerConfig(ClientConfig):
    """DefaultMQProducer's settings."""

    send_timeout: float = 3.0
    retry_times: int = 2  # extra attempts on another broker (sync and async sends)
    retry_another_broker_when_not_store_ok: bool = False
    compress_over: int = 4096
    compress_type: str = "zlib"  # "zlib" (every 4.x client reads it), "lz4" or "zstd" (5.x clients)
    max_message_size: int = 4 * 1024 * 1024
    default_topic_queue_nums: int = 4
    create_topic_key: str = AUTO_CREATE_TOPIC
    send_latency_fault_enable: bool = True
    max_async_in_flight: int = 10_000  # send_async tasks at once; more wait (backpressure)
    # autoBatch (RocketMQ 5.x): concurrent sends of a topic leave as SEND_BATCH_MESSAGE
    # requests of at most batch_max_bytes, batch_in_flight of them at once unless full; a
    # failed batch's messages go again one by one (client/batcher.py). On by default: a
    # lone send is a plain send, and each send keeps its own result and retries.
    auto_batch: bool = True
    batch_max_bytes: int = 32 * 1024
    batch_in_flight: int = 2

    def validate(self) -> None:
        ClientConfig.validate(self)
        if self.batch_max_bytes < 1:
            raise MQClientError(f"batch_max_bytes must be at least 1, not {self.batch_max_bytes}")
        if self.batch_in_flight < 1:
            raise MQClientError(f"batch_in_flight must be at least 1, not {self.batch_in_flight}")
        if self.compress_type not in ("zlib", "lz4", "zstd"):
            raise MQClientError(f"compress_type must be zlib, lz4 or zstd, not {self.compress_type!r}")
        if self.compress_type != "zlib":
            try:
                compress(b"", self.compress_type)
            except ProtocolError as exc:
                raise MQClientError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class ConsumerConfig(ClientConfig):
    """DefaultMQPushConsumer's (and the lite pull consumer's) settings."""

    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET
    consume_timestamp: int | None = None  # ms; None: half an hour ago (RocketMQ's default)
    pull_batch_size: int = 32
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100 * 1024 * 1024
    consume_concurrently_max_span: int = 2000
    consume_concurrency: int = 20  # concurrent handler calls (consumeThreadMax)
    max_reconsume_times: int = -1  # -1: 16 (concurrent); orderly: unlimited
    suspend_current_queue_time: float = 1.0  # orderly: pause after a failure
    rebalance_interval: float = 20.0
    persist_consumer_offset_interval: float = 5.0
    broker_suspend_max_time: float = 15.0  # long-poll hold asked of the broker
    consumer_timeout_when_suspend: float = 30.0  # our wait for a held pull
    pull_error_delay: float = 3.0
    flow_control_delay: float = 0.05
    lock_interval: float = 20.0  # orderly: re-lock queues
    offset_store_dir: Path | None = None  # broadcasting: None = ~/.rocketmq_offsets

    def validate(self) -> None:
        ClientConfig.validate(self)
        if self.pull_batch_size < 1 or self.consume_concurrency < 1:
            raise MQClientError("pull_batch_size and consume_concurrency must be >= 1")
        if not isinstance(self.message_model, MessageModel):
            raise MQClientError(f"message_model must be a MessageModel, got {self.message_model!r}")
        if not isinstance(self.consume_from_where, ConsumeFromWhere):
            raise MQClientError(f"consume_from_where must be a ConsumeFromWhere, got {self.consume_from_where!r}")
        if self.max_reconsume_times < -1:
            raise MQClientError("max_reconsume_times must be -1 (default) or >= 0")

    @property
    def broadcasting(self) -> bool:
        return self.message_model is MessageModel.BROADCASTING


# The settings as keyword arguments: the fields of the configs above (namesrv aside), with the
# same types; tests/client/test_options.py keeps the two in step.


class ClientOptions(TypedDict, total=False):
    """ClientConfig's settings, as every client's keyword arguments."""

    instance_name: str | None
    client_ip: str | None
    unit_name: str | None
    request_timeout: float
    poll_name_server_interval: float
    heartbeat_broker_interval: float
    tls: bool | ssl.SSLContext | TlsClientSettings
    access_key: str | None
    secret_key: str | None
    busy_poll_micros: int


class ProducerOptions(ClientOptions, total=False):
    """ProducerConfig's settings: the keyword arguments of Producer and TransactionProducer."""

    send_timeout: float
    retry_times: int
    retry_another_broker_when_not_store_ok: bool
    compress_over: int
    compress_type: str
    max_message_size: int
    default_topic_queue_nums: int
    create_topic_key: str
    send_latency_fault_enable: bool
    max_async_in_flight: int
    auto_batch: bool
    batch_max_bytes: int
    batch_in_flight: int


class ConsumerOptions(ClientOptions, total=False):
    """ConsumerConfig's settings: the keyword arguments of PushConsumer and PullConsumer."""

    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    consume_timestamp: int | None
    pull_batch_size: int
    pull_threshold_for_queue: int
    pull_threshold_size_for_queue: int
    consume_concurrently_max_span: int
    consume_concurrency: int
    max_reconsume_times: int
    suspend_current_queue_time: float
    rebalance_interval: float
    persist_consumer_offset_interval: float
    broker_suspend_max_time: float
    consumer_timeout_when_suspend: float
    pull_error_delay: float
    flow_control_delay: float
    lock_interval: float
    offset_store_dir: Path | None

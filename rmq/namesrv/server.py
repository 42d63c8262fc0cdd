"""NamesrvServer: the name server processors on a RemotingServer, plus broker liveness.

    async with NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0)) as srv:
        print(srv.address)                       # "127.0.0.1:<port>"

    addr = await nursery.start(NamesrvServer(config).serve)   # the same, in your nursery

A broker leaves the routing tables three ways, as in RocketMQ: it unregisters; the
connection it registered on closes (the remoting server's on_close hook); or it stays
silent for `broker_expiry` seconds, which the scan loop notices (first scan after
`first_scan_delay`, then every `scan_interval`, on Trio's clock so tests can use
autojump_clock). An expired broker's connection is closed too.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import trio

from rmq.lifetime import Service, unwrapped
from rmq.remoting import Connection, RemotingServer, ServerConfig, TlsMode
from rmq.remoting.tlsconfig import TlsConfigError, server_ssl_context
from rmq.rocketmq_keys import ConfigError

from .config import NamesrvConfig
from .kvconfig import KVConfigManager
from .processors import NamesrvState, build_dispatcher
from .route_info import RouteInfoManager

if TYPE_CHECKING:
    pass

log = logging.getLogger("rmq.namesrv")

NO_EXPORTER = "PROM, but this process has no exporter: call rmq.metrics.install() first"


class NamesrvServer(Service):
    """One name server: routing state, KV config, the remoting server, the scan loop.

    Args:
      config: settings (default: NamesrvConfig(), port 9876 on every address).
      ssl_context: server TLS context; default built from the config's cert and key
        paths when TLS is enabled.

    Raises ConfigError when TLS is enabled without a context or cert and key paths.
    """

    #: Builds the Prometheus exporter when metricsExporterType=PROM. rmq.metrics.install() sets
    #: it (the rmq commands, `rmq dev` and EmbeddedCluster call that): the name server never
    #: imports what observes it.
    exporter_factory: ClassVar[Callable[[NamesrvServer], Any] | None] = None

    def __init__(self, config: NamesrvConfig | None = None, *, ssl_context: ssl.SSLContext | None = None) -> None:
        config = config if config is not None else NamesrvConfig()
        self.routes = RouteInfoManager(clock=trio.current_time)
        self.kv = KVConfigManager(config.kv_config_path)
        self.state = NamesrvState(config, self.routes, self.kv)
        self.remoting = RemotingServer(
            build_dispatcher(self.state), _server_config(config, ssl_context), on_close=self._connection_closed
        )
        self._nursery: trio.Nursery | None = None
        self.metrics: Any = None  # metricsExporterType=PROM: the MetricsExporter (rmq/metrics)

    @property
    def config(self) -> NamesrvConfig:
        """The live configuration (UPDATE_NAMESRV_CONFIG may replace it)."""
        return self.state.config

    @property
    def port(self) -> int | None:
        """The bound TCP port once serving (useful with listen_port=0)."""
        return self.remoting.port

    @property
    def address(self) -> str:
        """The "host:port" to connect to (127.0.0.1 when listening on every address)."""
        return self.remoting.address

    @property
    def listen_address(self) -> str:
        """The "host:port" as bound, e.g. "0.0.0.0:9876"."""
        return f"{self.remoting.config.host}:{self.remoting.port}"

    def __repr__(self) -> str:
        return f"<NamesrvServer {self.listen_address} brokers={len(self.routes.live)}>"

    # -- lifetime ---------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        """Load the KV config, bind, report `self.address` to `nursery.start`, serve until
        shut down (`shutdown()` / `aclose()`) or cancelled.

        Raises OSError if a port cannot be bound (before reporting started), ConfigError
        for metricsExporterType=PROM without an exporter installed.
        """
        factory = type(self).exporter_factory
        prometheus = self.config.metrics_exporter_type == "PROM"
        if prometheus and factory is None:
            raise ConfigError("metrics_exporter_type", NO_EXPORTER)
        self.kv.load()
        async with unwrapped(), trio.open_nursery() as nursery:  # a port in use comes out as OSError
            self._nursery = nursery
            await nursery.start(self._serve_remoting)
            nursery.start_soon(self._scan_loop)
            if prometheus and factory is not None:
                self.metrics = factory(self)
                await nursery.start(self.metrics.serve)
            task_status.started(self.address)

    async def _serve_remoting(self, *, task_status: trio.TaskStatus[RemotingServer]) -> None:
        try:
            await self.remoting.serve(task_status=task_status)
        finally:
            # the server stopped, so the scan loop has nothing left to guard
            if self._nursery is not None:
                self._nursery.cancel_scope.cancel()

    def shutdown(self) -> None:
        """Begin a graceful shutdown: stop accepting, let in-flight requests finish."""
        self.remoting.shutdown()

    async def aclose(self) -> None:
        """Shut down gracefully and wait until every connection is closed."""
        await self.remoting.aclose()

    # -- liveness ---------------------------------------------------------------------

    async def _scan_loop(self) -> None:
        await trio.sleep(self.config.first_scan_delay)
        while True:
            self.scan_not_active_brokers()
            await trio.sleep(self.config.scan_interval)

    def scan_not_active_brokers(self) -> list[str]:
        """Drop brokers silent for longer than `broker_expiry` and close their
        connections (unless another live broker registered on the same one); returns
        their addresses."""
        expiry = self.config.broker_expiry
        expired = self.routes.scan_not_active(expiry)
        in_use = {info.channel for info in self.routes.live.values()}
        for addr, channel in expired:
            log.warning("broker %s expired: no registration for %g s", addr, expiry)
            # a connection that still carries a live broker's registrations stays open
            if isinstance(channel, Connection) and channel not in in_use:
                channel.close(f"broker {addr} expired")
        return [addr for addr, _ in expired]

    def _connection_closed(self, conn: Connection) -> None:
        for addr in self.routes.on_channel_closed(conn):
            log.info("broker %s removed: its connection closed (%s)", addr, conn.close_reason)


def _server_config(config: NamesrvConfig, ssl_context: ssl.SSLContext | None) -> ServerConfig:
    mode = TlsMode(config.tls_mode)
    if mode is not TlsMode.DISABLED and ssl_context is None:
        if not (config.tls_cert_path and config.tls_key_path):
            raise ConfigError("tls_mode", f"{mode.value} TLS needs tls_cert_path and tls_key_path")
        try:
            ssl_context = server_ssl_context(
                config.tls_cert_path,
                config.tls_key_path,
                key_password=config.tls_key_password,
                need_client_auth=config.tls_need_client_auth,
                trust_cert_path=config.tls_trust_cert_path,
            )
        except TlsConfigError as exc:
            raise ConfigError(exc.key, exc.message) from None
    return ServerConfig(
        host=config.listen_host,
        port=config.listen_port,
        tls_mode=mode,
        ssl_context=ssl_context,
        idle_timeout=config.idle_timeout,
        ws_port=config.websocket_port,
        max_connections=config.max_connections,
        max_connections_per_address=config.max_connections_per_address,
    )

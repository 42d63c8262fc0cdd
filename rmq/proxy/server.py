"""ProxyServer: the gRPC MessagingService in front of the brokers a name server knows."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar

import trio

from rmq.client.config import ClientConfig
from rmq.lifetime import Service

from .auth import GrpcAcl
from .config import ProxyConfig
from .grpc import GrpcServer
from .relay import ProxyInstance, Relay
from .service import MessagingService

log = logging.getLogger("rmq.proxy")

NO_EXPORTER = "metricsExporterType PROM, but this process has no exporter: call rmq.metrics.install() first"


class ProxyServer(Service):
    """Cluster mode: a client instance to the brokers (routes from `config.namesrv_addr`)
    and the gRPC server on `grpc_server_port` (0 picks a free one; `port` then says which)."""

    #: Builds the Prometheus exporter when metricsExporterType=PROM. rmq.metrics.install() sets
    #: it (the rmq commands, `rmq dev` and EmbeddedCluster call that): the proxy never imports
    #: what observes it.
    exporter_factory: ClassVar[Callable[[ProxyServer], Any] | None] = None

    def __init__(self, config: ProxyConfig, host: str = "0.0.0.0") -> None:
        """ValueError for settings it cannot serve with (TLS files, the ACL's files)."""
        self.config = config
        access_key, secret_key = config.broker_credentials() or (None, None)  # the brokers' ACL
        self.instance = ProxyInstance(
            ClientConfig(
                namesrv=config.namesrv(),
                instance_name=f"proxy-{config.proxy_name}",
                access_key=access_key,
                secret_key=secret_key,
            )
        )
        self.service = MessagingService(config, self.instance)
        self.instance.relay = Relay(
            self.service.consumers, self.service.channels, config.grpc_proxy_relay_request_timeout_in_seconds
        )
        methods = self.service.methods()
        self.acl = GrpcAcl(config.acl_file()) if config.enable_acl else None
        if self.acl is not None:
            methods = self.acl.guard(methods)
        self.grpc = GrpcServer(
            methods,
            host=host,
            port=config.grpc_server_port,
            tls=config.tls(),
            max_message=config.grpc_max_inbound_message_size,
            idle_timeout=config.grpc_client_idle_time_mills / 1000,
        )
        self.metrics: Any = None  # metricsExporterType=PROM: the MetricsExporter (rmq/metrics)
        self._scope = trio.CancelScope()

    @property
    def port(self) -> int:
        return self.grpc.port

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until shut down. ValueError for metricsExporterType=PROM without an exporter
        installed; OSError when a port cannot be bound."""
        factory = type(self).exporter_factory
        prometheus = self.config.metrics_exporter_type == "PROM"
        if prometheus and factory is None:
            raise ValueError(NO_EXPORTER)
        with self._scope:
            async with self.instance.running(), trio.open_nursery() as nursery:
                if self.acl is not None:
                    await nursery.start(self.acl.watch)
                if prometheus and factory is not None:
                    self.metrics = factory(self)
                    await nursery.start(self.metrics.serve)
                async with self.grpc:
                    tls = f"TLS {self.grpc.tls[0].value}" if self.grpc.tls else "plain"
                    acl = f", ACL {self.acl.acl.path}" if self.acl is not None else ""
                    log.info(
                        "gRPC proxy (%s mode) on port %d (%s%s)",
                        self.config.proxy_mode.lower(),
                        self.grpc.port,
                        tls,
                        acl,
                    )
                    task_status.started(self.grpc.port)
                    await trio.sleep_forever()

    def shutdown(self) -> None:
        self._scope.cancel()

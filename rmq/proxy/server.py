"""ProxyServer: the gRPC MessagingService in front of the brokers a name server knows."""

from __future__ import annotations

import logging
from typing import Any

import trio

from rmq.client.config import ClientConfig
from rmq.client.instance import ClientInstance
from rmq.lifetime import Service

from .config import ProxyConfig
from .grpc import GrpcServer
from .service import MessagingService

log = logging.getLogger("rmq.proxy")


class ProxyServer(Service):
    """Cluster mode: a client instance to the brokers (routes from `config.namesrv_addr`)
    and the gRPC server on `grpc_server_port` (0 picks a free one; `port` then says which)."""

    def __init__(self, config: ProxyConfig, host: str = "0.0.0.0") -> None:
        self.config = config
        self.instance = ClientInstance(
            ClientConfig(namesrv=config.namesrv(), instance_name=f"proxy-{config.proxy_name}")
        )
        self.service = MessagingService(config, self.instance)
        self.grpc = GrpcServer(self.service.methods(), host=host, port=config.grpc_server_port, tls=config.tls())
        self._scope = trio.CancelScope()

    @property
    def port(self) -> int:
        return self.grpc.port

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        with self._scope:
            async with self.instance.running():
                async with self.grpc:
                    tls = f"TLS {self.grpc.tls[0].value}" if self.grpc.tls else "plain"
                    log.info(
                        "gRPC proxy (%s mode) on port %d (%s)", self.config.proxy_mode.lower(), self.grpc.port, tls
                    )
                    task_status.started(self.grpc.port)
                    await trio.sleep_forever()

    def shutdown(self) -> None:
        self._scope.cancel()

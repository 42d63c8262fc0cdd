"""RocketMQ 5's gRPC proxy (apache.rocketmq.v2.MessagingService) for the 5.x clients."""

from .config import ProxyConfig
from .server import ProxyServer

__all__ = ["ProxyConfig", "ProxyServer"]

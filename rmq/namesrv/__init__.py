"""The name server: broker registration, topic routes, KV config (PROTOCOL.md 3.8).

`rmq namesrv` / `mqnamesrv` runs one (rmq.namesrv.startup); tests and `rmq dev` run
NamesrvServer in their own nursery.
"""

from .config import NamesrvConfig as NamesrvConfig
from .route_info import RouteInfoManager as RouteInfoManager
from .server import NamesrvServer as NamesrvServer

__all__ = ["NamesrvConfig", "NamesrvServer", "RouteInfoManager"]

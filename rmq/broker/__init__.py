"""The broker: stores messages and serves producers, consumers and admin tools.

    config = BrokerConfig.load("broker.conf", {"namesrvAddr": "127.0.0.1:9876"})
    async with BrokerController(config) as broker:
        ...                                   # serving on broker.address

`rmq broker` / `mqbroker` (startup.main) is the command-line front.
"""

from .config import BrokerConfig as BrokerConfig
from .config import BrokerRole as BrokerRole
from .config import ConfigError as ConfigError
from .controller import BrokerController as BrokerController
from .processors import build_dispatcher as build_dispatcher

__all__ = ["BrokerConfig", "BrokerController", "BrokerRole", "ConfigError", "build_dispatcher"]

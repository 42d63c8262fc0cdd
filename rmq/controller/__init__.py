"""RocketMQ 5's controller (RIP-44): for each broker group, its brokers, its master and the
SyncStateSet of brokers in sync with it, with their epochs; a new master elected from the
SyncStateSet when the master's heartbeats stop.

Sans-IO: `replicas` (the state and its events' requests), `elect` (DefaultElectPolicy),
`heartbeat` (which brokers are alive), `events` (their log codec). The state is replicated
by a DLedger group of its own (rmq.dledger): `server.ControllerServer` is one member on Trio,
`rmq controller` / `mqcontroller` (`startup`) runs one. See docs/controller.md.
"""

from .config import ControllerConfig as ControllerConfig
from .heartbeat import BrokerHeartbeatManager as BrokerHeartbeatManager
from .replicas import ReplicasInfoManager as ReplicasInfoManager
from .server import ControllerServer as ControllerServer

__all__ = ["BrokerHeartbeatManager", "ControllerConfig", "ControllerServer", "ReplicasInfoManager"]

"""The parts of a broker that its processors and services work with, passed as values.

``BrokerController`` (controller.py) builds one ``BrokerParts`` once its store is open, and
hands it, or less, to everything it assembles: the request processors, replication, the ACL
processor and the delivery services. None of them sees the controller, so each can be built
in a test from parts over a store in ``tmp_path``, and nothing under the controller imports
it.

What changes while a broker runs lives in two small cells the parts hold:

* ``RoleCell``: the configuration as of now (a DLedger election or UPDATE_BROKER_CONFIG
  replaces the frozen ``BrokerConfig``), the master the name servers named, the
  replication running under the broker (for status), set once it starts, and how much of
  the CommitLog counts as in memory.
* ``Identity``: the address the broker registers and stamps into records, known once its
  port is bound.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rmq.store import MessageStore
    from rmq.store.aio import AsyncMessageStore

    from .client_manager import ClientManager
    from .config import BrokerConfig
    from .long_polling import PullWaiters
    from .offsets import ConsumerOffsetManager
    from .order_info import ConsumerOrderInfoManager
    from .pop_queues import PopQueues
    from .rebalance_lock import RebalanceLockManager
    from .stats import BrokerStats
    from .subscriptions import SubscriptionGroupManager
    from .topics import TopicConfigManager


class ReplicationStatus(Protocol):
    """What a running replication tells about itself (HA master or slave)."""

    def runtime_info(self) -> dict[str, Any]: ...

    async def status_fields(self) -> dict[str, str]: ...


class MemberStatus(Protocol):
    """What a DLedger member under the broker tells about itself."""

    def status_fields(self) -> dict[str, str]: ...


class RoleCell:
    """The broker's configuration as of now, and what its role brought with it.

    ``config`` is replaced whole (``BrokerConfig`` is frozen): readers take ``cell.config``
    at each use and never keep it across an await.
    """

    __slots__ = ("config", "controller", "dledger", "ha", "master_addr", "memory_budget")

    def __init__(self, config: BrokerConfig, memory_budget: int = 0) -> None:
        self.config = config
        # bytes of CommitLog behind its end still counted as in the page cache
        # (accessMessageInMemoryMaxRatio of the machine's memory)
        self.memory_budget = memory_budget
        self.master_addr = ""  # a slave's master, as the name servers last said
        self.ha: ReplicationStatus | None = None  # HA master service or slave client, once started
        self.dledger: MemberStatus | None = None  # the DLedger member, when there is one
        self.controller: MemberStatus | None = None  # enableControllerMode: its controller dealings


class Identity:
    """brokerIP1 and the bound port: the address registered with the name servers and the
    store host stamped into records."""

    __slots__ = ("boot_time", "ip", "port")

    def __init__(self, ip: str, boot_time: float) -> None:
        self.ip = ip
        self.port = 0  # set once the main port is bound
        self.boot_time = boot_time  # seconds since the epoch

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"

    @property
    def store_host(self) -> tuple[str, int]:
        return self.ip, self.port


@dataclass(frozen=True, slots=True)
class BrokerParts:
    """Everything a processor or a service of one broker may use; see the module docstring.

    Attributes:
      role: the configuration as of now and the replication under the broker.
      identity: the broker's address.
      message_store: the synchronous store (reads); store: its AsyncMessageStore (appends).
      topics, offsets, subscriptions, clients, locks, waiters, stats: the broker's tables.
      order_info: orderly POP's batches in flight; pop_queues: POP's queue locks and waiting pops.
      clock_ms: wall-clock milliseconds (store and delivery times).
      sleep_wall: sleeps that many seconds of ``clock_ms`` time, less if the clock jumps.
      notify_consumers: tells a group's consumers to rebalance (NOTIFY_CONSUMER_IDS_CHANGED),
        without waiting for them.
    """

    role: RoleCell
    identity: Identity
    message_store: MessageStore
    store: AsyncMessageStore
    topics: TopicConfigManager
    offsets: ConsumerOffsetManager
    subscriptions: SubscriptionGroupManager
    clients: ClientManager
    locks: RebalanceLockManager
    waiters: PullWaiters
    stats: BrokerStats
    order_info: ConsumerOrderInfoManager
    pop_queues: PopQueues
    clock_ms: Callable[[], int]
    sleep_wall: Callable[[float], Awaitable[None]]
    notify_consumers: Callable[[str], None]

    @property
    def config(self) -> BrokerConfig:
        return self.role.config

    @property
    def address(self) -> str:
        return self.identity.address

    @property
    def store_host(self) -> tuple[str, int]:
        return self.identity.store_host

    @property
    def boot_time(self) -> float:
        return self.identity.boot_time

    def is_in_disk(self, topic: str, queue_id: int, offset: int) -> bool:
        """Whether the message at ``offset`` is far enough behind the CommitLog end to have
        left the page cache (checkInDiskByConsumeOffset)."""
        store = self.message_store
        if offset >= store.get_max_offset_in_queue(topic, queue_id):
            return False
        phy = store.get_commitlog_offset_in_queue(topic, queue_id, offset)
        return store.max_phy_offset - phy > self.role.memory_budget

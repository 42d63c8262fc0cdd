"""A broker's parts over a store in tmp_path, without a controller, servers or sockets: what a
processor or a service is built from in a test.

    with broker_parts(tmp_path) as parts:
        processor = SendProcessor(parts)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import trio

from rmq.broker.client_manager import ClientManager
from rmq.broker.long_polling import PullWaiters
from rmq.broker.offsets import ConsumerOffsetManager
from rmq.broker.order_info import ConsumerOrderInfoManager
from rmq.broker.parts import BrokerParts, Identity, RoleCell
from rmq.broker.pop_queues import PopQueues
from rmq.broker.rebalance_lock import RebalanceLockManager
from rmq.broker.stats import BrokerStats
from rmq.broker.subscriptions import SubscriptionGroupManager
from rmq.broker.topics import TopicConfigManager
from rmq.store import MessageStore, StoreConfig, wall_clock_ms
from rmq.store.aio import AsyncMessageStore

from .cluster import broker_config


async def _sleep(seconds: float) -> None:
    await trio.sleep(seconds)


def _no_consumers(_group: str) -> None:
    pass


@contextlib.contextmanager
def broker_parts(store: Path, **props: str) -> Iterator[BrokerParts]:
    """Parts of a broker configured as ``broker_config(store, **props)``; its store is open
    (not running: appends go in, nothing is flushed or dispatched by a task) until the block
    ends."""
    config = broker_config(store, **props)
    message_store = MessageStore(
        StoreConfig(
            store_path_root_dir=str(config.store_path_root_dir),
            mapped_file_size_commitlog=config.mapped_file_size_commit_log,
            mapped_file_size_consume_queue=config.mapped_file_size_consume_queue,
            max_message_size=config.max_message_size,
        )
    )
    identity = Identity(config.broker_ip1, 0.0)
    identity.port = 10911
    parts = BrokerParts(
        role=RoleCell(config),
        identity=identity,
        message_store=message_store,
        store=AsyncMessageStore(message_store),
        topics=TopicConfigManager(config),
        offsets=ConsumerOffsetManager(config.config_dir),
        subscriptions=SubscriptionGroupManager(config),
        clients=ClientManager(trio.current_time),
        locks=RebalanceLockManager(trio.current_time),
        waiters=PullWaiters(),
        stats=BrokerStats(trio.current_time),
        order_info=ConsumerOrderInfoManager(config.config_dir, now_ms=wall_clock_ms),
        pop_queues=PopQueues(),
        clock_ms=wall_clock_ms,
        sleep_wall=_sleep,
        notify_consumers=_no_consumers,
    )
    try:
        yield parts
    finally:
        message_store.close()

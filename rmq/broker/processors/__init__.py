"""The broker's request processors and the dispatcher that routes codes to them.

Codes are grouped as RocketMQ groups them onto executors, so a flood of one kind (say
pulls) cannot starve another (heartbeats): each group is one Route with its own limiter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmq.protocol import RequestCode
from rmq.remoting import Dispatcher

from ..acl.processor import AclProcessor
from .admin import AdminProcessor
from .client_manage import ClientManageProcessor
from .end_transaction import EndTransactionProcessor
from .pop import AckProcessor, PopProcessor
from .pop_watch import NotificationProcessor, PeekProcessor, PollingInfoProcessor
from .pull import PullProcessor
from .reply import ReplyProcessor
from .reset_offset import ResetOffsetProcessor
from .send import SendProcessor

if TYPE_CHECKING:
    from ..acl import PlainAcl
    from ..parts import BrokerParts
    from ..schedule import ScheduleService
    from ..transaction import TransactionService

# A parked pull holds its slot while it waits (up to suspendTimeoutMillis), so pulls get
# as many slots as there can be queues; connections' max_in_flight bounds them instead.
PULL_CONCURRENCY = 1 << 20
SEND_CONCURRENCY = 256  # SYNC_FLUSH sends wait for the group commit while holding a slot


def build_dispatcher(
    broker: BrokerParts,
    schedule: ScheduleService,
    transactions: TransactionService,
    acl: PlainAcl | None = None,
    *,
    vip: bool = False,
) -> Dispatcher:
    """Every broker processor on one Dispatcher, over the broker's parts and the services
    some of them answer for (delay progress, transaction outcomes); `vip` leaves out
    PULL_MESSAGE, POP_MESSAGE and the requests that look at POP queues (PEEK_MESSAGE,
    NOTIFICATION, POLLING_INFO): the fast channel on listenPort - 2 serves everything but
    those, as RocketMQ's fast port. Unknown codes are answered REQUEST_CODE_NOT_SUPPORTED
    by the dispatcher. With an `acl` (aclEnable=true) it checks every request first (the
    dispatcher hook)."""
    dispatcher = Dispatcher(hook=acl.hook if acl is not None else None)
    dispatcher.register(SendProcessor.CODES, SendProcessor(broker), concurrency=SEND_CONCURRENCY)
    # replies wait for their push to the requester: a route of their own, as RocketMQ's reply executor
    dispatcher.register(ReplyProcessor.CODES, ReplyProcessor(broker))
    if not vip:
        dispatcher.register(PullProcessor.CODES, PullProcessor(broker), concurrency=PULL_CONCURRENCY)
        # a waiting pop holds its slot too, as does a waiting notification
        dispatcher.register(PopProcessor.CODES, PopProcessor(broker), concurrency=PULL_CONCURRENCY)
        dispatcher.register(NotificationProcessor.CODES, NotificationProcessor(broker), concurrency=PULL_CONCURRENCY)
        dispatcher.register(PeekProcessor.CODES, PeekProcessor(broker))
        dispatcher.register(PollingInfoProcessor.CODES, PollingInfoProcessor(broker))
    dispatcher.register(AckProcessor.CODES, AckProcessor(broker))
    clients = ClientManageProcessor(broker)
    dispatcher.register(
        (RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT, RequestCode.CHECK_CLIENT_CONFIG), clients
    )
    dispatcher.register(
        (RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.UPDATE_CONSUMER_OFFSET),
        clients,
    )
    dispatcher.register((RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ), clients)
    dispatcher.register(EndTransactionProcessor.CODES, EndTransactionProcessor(broker, transactions))
    dispatcher.register(ResetOffsetProcessor.CODES, ResetOffsetProcessor(broker))
    admin = AdminProcessor(broker, schedule)
    queries = (RequestCode.QUERY_MESSAGE, RequestCode.VIEW_MESSAGE_BY_ID)
    dispatcher.register(queries, admin)
    dispatcher.register([c for c in admin.codes if c not in queries], admin)
    dispatcher.register(AclProcessor.CODES, AclProcessor(broker, acl))
    return dispatcher


__all__ = [
    "AckProcessor",
    "AdminProcessor",
    "ClientManageProcessor",
    "EndTransactionProcessor",
    "NotificationProcessor",
    "PeekProcessor",
    "PollingInfoProcessor",
    "PopProcessor",
    "PullProcessor",
    "ReplyProcessor",
    "ResetOffsetProcessor",
    "SendProcessor",
    "build_dispatcher",
]

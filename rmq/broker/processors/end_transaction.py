"""END_TRANSACTION (37): a producer commits or rolls back a half message (PROTOCOL.md 3.5).

The request names the half message by CommitLog offset and half-queue offset; both and
its producer group must match the stored half message, as RocketMQ checks. What the
outcome does is decided by the transaction's state (transaction.TRANSITIONS). An
UNKNOWN outcome (0) or any other value gets no response at all, as in RocketMQ; clients
send this request oneway anyway.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import properties as P
from rmq.protocol.constants import TRANS_HALF_TOPIC
from rmq.protocol.headers import EndTransactionRequestHeader
from rmq.protocol.message import TRANSACTION_NOT_TYPE

from ..transaction import END_INPUTS
from .common import fail

if TYPE_CHECKING:
    from rmq.remoting.abc import RequestContext

    from ..parts import BrokerParts
    from ..transaction import TransactionService

log = logging.getLogger("rmq.broker.end_transaction")


class EndTransactionProcessor:
    CODES = (RequestCode.END_TRANSACTION,)

    def __init__(self, broker: BrokerParts, transactions: TransactionService) -> None:
        self.broker = broker
        self.transactions = transactions

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        broker = self.broker
        header = EndTransactionRequestHeader.from_ext(request.ext_fields)
        if broker.config.is_slave:
            return fail(request, ResponseCode.SLAVE_NOT_AVAILABLE, "Can't commit or rollback a transaction on a slave.")
        kind = header.commit_or_rollback
        if kind not in END_INPUTS:
            log.warning("END_TRANSACTION from %s with unknown outcome %d ignored", ctx.remote_address, kind)
            return None
        if request.remark:  # the producer's local-transaction error, if any
            log.info("transaction %s of %s ended with remark: %s", header.msg_id, header.producer_group, request.remark)
        half = broker.message_store.look_message_by_offset(header.commit_log_offset)
        if half is None or half.topic != TRANS_HALF_TOPIC:
            return fail(request, ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        if half.properties.get(P.PGROUP) != header.producer_group:
            return fail(request, ResponseCode.SYSTEM_ERROR, "The producer group wrong")
        if half.queue_offset != header.tran_state_table_offset:
            return fail(request, ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
        code, remark = await self.transactions.end(half, kind)
        if kind == TRANSACTION_NOT_TYPE and code == ResponseCode.SUCCESS:
            return None  # UNKNOWN: RocketMQ answers nothing
        return request.make_response(code, remark)

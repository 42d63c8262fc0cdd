"""TransactionProducer: RocketMQ's TransactionMQProducer on top of the client's Producer.

    async def local(msg: Message, arg: Any) -> TransactionState:    # your local transaction
        ...
    async def check(msg: MessageExt) -> TransactionState:           # asked later by the broker
        ...

    async with TransactionProducer("tx_group", namesrv="127.0.0.1:9876", check=check) as p:
        result = await p.send_message_in_transaction(Message("Orders", b"..."), local, arg)

`send_message_in_transaction` sends a half message (TRAN_MSG=true, PGROUP=group,
sysFlag TRANSACTION_PREPARED), runs `local` only if the broker stored it, then ends the
transaction with END_TRANSACTION (oneway, as Java does) carrying COMMIT, ROLLBACK or
UNKNOWN. A half message never ended (UNKNOWN, a crash, a lost END) is checked back by
the broker: it sends CHECK_TRANSACTION_STATE over this client's connection and the
`check` callback's answer goes back as END_TRANSACTION with fromTransactionCheck=true.

The callbacks may be plain or async functions. One that raises counts as UNKNOWN (its
message travels in the END_TRANSACTION remark) so the broker asks again later.
"""

from __future__ import annotations

import enum
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Unpack

from rmq.protocol import RemotingCommand, RequestCode
from rmq.protocol import properties as P
from rmq.protocol.constants import DEFAULT_PRODUCER_GROUP
from rmq.protocol.errors import ProtocolError
from rmq.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rmq.protocol.message import TRANSACTION_PREPARED_TYPE, MessageExt, decode_record, parse_offset_msg_id
from rmq.protocol.message import Message as ProtocolMessage
from rmq.remoting import Dispatcher, RemotingError, RequestContext

from .config import ProducerOptions
from .errors import MQClientError
from .members import Instance
from .message import SendResult, SendStatus
from .producer import Producer, _Outgoing

log = logging.getLogger("rmq.client.transaction")

END_TIMEOUT = 3.0  # seconds to queue an END_TRANSACTION


class TransactionState(enum.Enum):
    """A local transaction's outcome; the value is END_TRANSACTION's commitOrRollback."""

    COMMIT = 0x8
    ROLLBACK = 0xC
    UNKNOWN = 0x0


# (message, arg) → outcome; the message is the one passed to send_message_in_transaction
LocalTransaction = Callable[[Any, Any], "TransactionState | Awaitable[TransactionState]"]
CheckListener = Callable[[MessageExt], "TransactionState | Awaitable[TransactionState]"]


@dataclass(frozen=True, slots=True)
class TransactionSendResult:
    """The half message's SendResult and what the local transaction decided."""

    send_result: SendResult
    local_state: TransactionState


class TransactionProducer(Producer):
    """A Producer that also sends transactional messages; see the module docstring.

    Args:
      group: the producer group; the broker asks a live member of it about transactions
        left open.
      check: answers the broker's check-backs (None: every check is answered UNKNOWN).
      Other arguments as for Producer.
    """

    def __init__(
        self,
        group: str = DEFAULT_PRODUCER_GROUP,
        namesrv: str | Sequence[str] | None = None,
        *,
        check: CheckListener | None = None,
        instance: Instance | None = None,
        enable_trace: bool = False,
        trace_topic: str | None = None,
        **options: Unpack[ProducerOptions],
    ) -> None:
        super().__init__(
            group, namesrv, instance=instance, enable_trace=enable_trace, trace_topic=trace_topic, **options
        )
        self.check = check

    def __repr__(self) -> str:
        return f"<TransactionProducer {self.group} {self.instance.client_id}>"

    @asynccontextmanager
    async def _lifecycle(self) -> AsyncIterator[None]:
        router = _CheckRouter.of(self.instance.dispatcher)
        router.producers[self.group] = self
        try:
            async with super()._lifecycle():
                yield
        finally:
            if router.producers.get(self.group) is self:
                del router.producers[self.group]

    async def send_message_in_transaction(
        self,
        msg: ProtocolMessage,
        local_transaction: LocalTransaction,
        arg: Any = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109  public API
    ) -> TransactionSendResult:
        """Half-send `msg`, run `local_transaction(msg, arg)`, end the transaction.

        Returns the half message's SendResult and the local outcome (ROLLBACK without
        running the local transaction when the broker did not store the half message).

        Raises MQClientError subclasses as `send` does, for the half message only; a lost
        END_TRANSACTION is logged, not raised: the broker's check-back settles it.
        """
        self._check_running()
        msg.properties.pop(P.DELAY, None)  # a delay applies after the commit, not to the half message
        msg.properties[P.TRAN_MSG] = "true"
        msg.properties[P.PGROUP] = self.group
        out = _Outgoing(msg, self.config.compress_over, self._ids, self.config.compress_type)
        out.sys_flag |= TRANSACTION_PREPARED_TYPE
        result = await self._send_outgoing(out, timeout, None, None, None, msg, oneway=False)
        assert result is not None
        remark = None
        if result.status is not SendStatus.SEND_OK:
            state = TransactionState.ROLLBACK
        else:
            state, remark = await _decide(local_transaction, msg, arg)
        await self._end(result, state, remark)
        return TransactionSendResult(result, state)

    async def _end(self, result: SendResult, state: TransactionState, remark: str | None) -> None:
        addr = self.instance.master_addr(result.message_queue.broker_name)
        try:
            _, _, commitlog_offset = parse_offset_msg_id(result.offset_msg_id)
        except (ProtocolError, ValueError):
            log.warning("cannot end transaction %s: bad offset message id %r", result.msg_id, result.offset_msg_id)
            return
        if addr is None:
            log.warning("cannot end transaction %s: broker %s unknown", result.msg_id, result.message_queue.broker_name)
            return
        header = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=result.queue_offset,
            commit_log_offset=commitlog_offset,
            commit_or_rollback=state.value,
            msg_id=result.msg_id,
            from_transaction_check=False,
            transaction_id=result.transaction_id or result.msg_id,
        )
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext())
        request.remark = remark
        try:
            await self.instance.api.invoke_oneway(addr, request, END_TIMEOUT)
        except MQClientError as exc:
            log.warning(
                "END_TRANSACTION for %s to %s failed (the broker will check back): %s", result.msg_id, addr, exc
            )

    async def answer_check(self, msg: MessageExt) -> tuple[TransactionState, str | None]:
        """Run the `check` callback for a half message the broker asks about."""
        if self.check is None:
            return TransactionState.UNKNOWN, "no check listener"
        return await _decide(self.check, msg)


async def _decide(fn: Callable[..., Any], *args: Any) -> tuple[TransactionState, str | None]:
    """Call a local-transaction or check callback; an exception or a bad value is UNKNOWN."""
    try:
        state = fn(*args)
        if inspect.isawaitable(state):
            state = await state
    except Exception as exc:
        log.exception("transaction callback %r failed", fn)
        return TransactionState.UNKNOWN, f"{type(exc).__name__}: {exc}"
    if not isinstance(state, TransactionState):
        log.warning("transaction callback %r returned %r, taken as UNKNOWN", fn, state)
        return TransactionState.UNKNOWN, None
    return state, None


class _CheckRouter:
    """The client instance's CHECK_TRANSACTION_STATE processor: hands each check to the
    TransactionProducer of the half message's group (PGROUP) and sends the answer back on
    the connection it came from."""

    def __init__(self) -> None:
        self.producers: dict[str, TransactionProducer] = {}

    @classmethod
    def of(cls, dispatcher: Dispatcher) -> _CheckRouter:
        return dispatcher.processor_of(RequestCode.CHECK_TRANSACTION_STATE, cls)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        try:
            header = CheckTransactionStateRequestHeader.from_ext(request.ext_fields)
            msg, _ = decode_record(request.body)
        except ProtocolError as exc:
            log.warning("bad CHECK_TRANSACTION_STATE from %s: %s", ctx.remote_address, exc)
            return None
        group = msg.properties.get(P.PGROUP, "")
        producer = self.producers.get(group)
        if producer is None:
            log.warning("check for transaction %s of group %r, which no producer here serves", header.msg_id, group)
            return None
        state, remark = await producer.answer_check(msg)
        end = EndTransactionRequestHeader(
            producer_group=group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=state.value,
            msg_id=msg.properties.get(P.UNIQ_KEY) or header.msg_id or "",
            from_transaction_check=True,
            transaction_id=header.transaction_id,
        )
        command = RemotingCommand.request(RequestCode.END_TRANSACTION, end.to_ext())
        command.remark = remark
        producer.instance.api.sign(command)  # sent on the broker's connection, past ClientAPI
        try:
            await ctx.connection.invoke_oneway(command, END_TIMEOUT)
        except RemotingError as exc:
            log.warning("cannot answer the check of %s: %s", header.msg_id, exc)
        return None


@asynccontextmanager
async def open_transaction_producer(
    group: str = DEFAULT_PRODUCER_GROUP,
    namesrv: str | Sequence[str] | None = None,
    *,
    check: CheckListener | None = None,
    **options: Unpack[ProducerOptions],
) -> AsyncIterator[TransactionProducer]:
    """`async with open_transaction_producer(...) as p:`, the functional spelling."""
    async with TransactionProducer(group, namesrv, check=check, **options) as producer:
        yield producer

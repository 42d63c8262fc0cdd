"""Producer: sends messages the way RocketMQ's DefaultMQProducer does.

    async with Producer("my_group", namesrv="127.0.0.1:9876") as producer:
        result = await producer.send(Message("TopicTest", b"hello", tags="TagA"))

Theory of operation
-------------------
A send validates the message, gives it a UNIQ_KEY (the client message id), compresses
a body of 4 KiB or more with zlib, finds the topic's publish queues and sends
SEND_MESSAGE_V2 (batches: SEND_BATCH_MESSAGE) to the master of the chosen queue's
broker.

* Publish queues come from the route cache. A topic seen for the first time is looked
  up on the name servers; if none knows it, the producer uses TBW102's route capped at
  `default_topic_queue_nums` queues and the broker creates the topic on the first send
  (auto-create). The instance refreshes routes every 30 s.
* Queues are taken round-robin. A sync or async send that fails with a connection
  error, a timeout or a retriable broker code (17, 14, 1, 16, 204, 205) is tried again
  on another broker, `retry_times` (2) more times, all within one `send_timeout`.
* Fault avoidance: every attempt's latency is recorded; brokers that were slow or
  failed are skipped for a while (latency.py).
* After a failed attempt the topic's route is fetched again at once, in the instance's
  nursery: a timeout uses up the send's time, and the next send still finds the new
  master (a DLedger election) or the other brokers. A send left with only brokers that
  failed lately waits for a refresh under way, and while it waits on such a broker (a hung
  master) the route is fetched every second; should it name another master, or a broker
  that has not failed, the send is given up there and retried on it.
* Ordered sends pick the queue with a selector and are never moved to another queue.
* Concurrent sends of a topic leave together as batches (`auto_batch`, on by default;
  batcher.py): a lone send is a plain one, each send gets its own result, and the messages
  of a batch that failed (one attempt) are sent again one by one, each a plain send.
* A plain send (no queue or selector, no tracing or signing, a body below `compress_over`,
  not a reply nor a resend to a retry topic; with auto batching, one that finds nothing of
  its topic on the wire) makes its first attempt in
  `_send_plain`, one coroutine down to the connection, its header written from a template
  (plain_send.py). It chooses the queue as `PublishInfo.select` would while no broker is
  marked unavailable; otherwise, and after a failed attempt, the general path takes over
  with the same retries and fault avoidance.

`send_async` runs the send in the producer's nursery and reports through a callback;
leaving `async with` waits for those sends, then unregisters the producer from the
brokers and closes the connections.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Unpack

import trio

from rmq.protocol import ProtocolError, RequestCode
from rmq.protocol import properties as P
from rmq.protocol.constants import DEFAULT_PRODUCER_GROUP, RETRY_PREFIX
from rmq.protocol.headers import SendMessageRequestHeader
from rmq.protocol.message import Message as ProtocolMessage
from rmq.protocol.message import encode_batch_body
from rmq.remoting import RemotingError, RemotingSendRequestError

from .batcher import AutoBatcher, batchable
from .config import ProducerConfig, ProducerOptions
from .errors import (
    MQClientError,
    MQClientStateError,
    MQConnectError,
    MQNoRouteError,
    MQTimeoutError,
    is_retriable,
    translate_remoting_error,
)
from .ids import UniqueIdGenerator, wall_clock_ms
from .instance import ROUTE_RETRY_INTERVAL, ClientInstance
from .latency import LatencyFaultTolerance
from .members import Instance
from .message import (
    MessageExt,
    MessageQueue,
    MQMessageError,
    SendResult,
    SendStatus,
    check_batch,
    check_message,
    compress_body,
    split_batch,
)
from .plain_send import SendRequest, SendTemplate, send_result
from .reply import is_reply, reply_message
from .reply import request as _request
from .route import PublishInfo, TopicRoute
from .selector import QueueSelector, select_by_hash
from .service import AsyncService
from .trace import TraceDispatcher, inner_producer_group

log = logging.getLogger("rmq.client.producer")

SendCallback = Callable[[SendResult | MQClientError], Awaitable[None] | None]


class _Outgoing:
    """One request's worth of message: what goes on the wire, derived once per send."""

    __slots__ = (
        "batch",
        "body",
        "flag",
        "max_reconsume",
        "msg_id",
        "properties",
        "reconsume_times",
        "reply",
        "sys_flag",
        "topic",
    )

    def __init__(
        self, msg: ProtocolMessage, compress_over: int, id_gen: UniqueIdGenerator, codec: str = "zlib"
    ) -> None:
        props = msg.properties
        if not props.get(P.UNIQ_KEY):
            props[P.UNIQ_KEY] = id_gen.next_id()
        self.topic = msg.topic
        self.body, self.sys_flag = compress_body(msg.body, compress_over, codec)
        self.flag = msg.flag
        self.msg_id = props[P.UNIQ_KEY]
        self.batch = False
        self.reply = is_reply(props)
        self.reconsume_times: int | None = None
        self.max_reconsume: int | None = None
        if msg.topic.startswith(RETRY_PREFIX) and (P.RECONSUME_TIME in props or P.MAX_RECONSUME_TIMES in props):
            props = dict(props)  # retry bookkeeping travels in the header, not in the properties
            reconsume = props.pop(P.RECONSUME_TIME, None)
            maximum = props.pop(P.MAX_RECONSUME_TIMES, None)
            self.reconsume_times = int(reconsume) if reconsume else None
            self.max_reconsume = int(maximum) if maximum else None
        self.properties = P.encode_properties(props)

    @classmethod
    def batch_of(cls, msgs: Sequence[ProtocolMessage], id_gen: UniqueIdGenerator) -> _Outgoing:
        for m in msgs:
            if not m.properties.get(P.UNIQ_KEY):
                m.properties[P.UNIQ_KEY] = id_gen.next_id()
        out = cls.__new__(cls)
        out.topic = msgs[0].topic
        out.body = encode_batch_body(msgs)
        out.sys_flag = 0
        out.flag = 0
        out.properties = P.encode_properties({P.WAIT: "false"} if msgs[0].properties.get(P.WAIT) == "false" else {})
        out.msg_id = ",".join(m.properties[P.UNIQ_KEY] for m in msgs)
        out.batch = True
        out.reply = False
        out.reconsume_times = None
        out.max_reconsume = None
        return out


class Producer(AsyncService):
    """A message producer; use as `async with Producer(group, namesrv=...) as p`.

    Args:
      group: the producer group (used for transactions and in the broker's client lists).
      namesrv: name server addresses, "host:port;host:port" or a list; None reads
        $NAMESRV_ADDR.
      instance: share another client's connections and routes (an expert entry point:
        the caller runs `instance.running()`).
      **options: ProducerOptions (ProducerConfig's fields: send_timeout, retry_times, ...).

    Raises TypeError for an unknown option and MQClientError for a bad value or name
    server address, at construction.
    """

    def __init__(
        self,
        group: str = DEFAULT_PRODUCER_GROUP,
        namesrv: str | Sequence[str] | None = None,
        *,
        instance: Instance | None = None,
        enable_trace: bool = False,
        trace_topic: str | None = None,
        **options: Unpack[ProducerOptions],
    ) -> None:
        if not group:
            raise MQClientError("the producer group must not be empty")
        self.group = group
        self.config = ProducerConfig.build(
            namesrv if instance is None else instance.namesrv, options, type(self).__name__
        )
        self._own_instance = instance is None
        self.instance: Instance = instance if instance is not None else ClientInstance(self.config)
        self._ids = UniqueIdGenerator(self.instance.ip)
        self._publish: dict[str, PublishInfo] = {}
        self._faults = LatencyFaultTolerance(trio.current_time) if self.config.send_latency_fault_enable else None
        self._route_lock = trio.Lock()
        self._async_slots = trio.Semaphore(self.config.max_async_in_flight)
        self._nursery: trio.Nursery | None = None
        self._clock: Callable[[], float] = trio.current_time
        # Pub records to the trace topic (trace.py), sent in the background
        self.tracer = (
            TraceDispatcher(
                self.instance.ip, group, Producer(inner_producer_group(group), instance=self.instance), trace_topic
            )
            if enable_trace
            else None
        )
        c = self.config
        self._batcher = (
            AutoBatcher(
                self._send_as_batch, min(c.batch_max_bytes, c.max_message_size), c.batch_in_flight, self._ids.length
            )
            if c.auto_batch
            else None
        )

    def __repr__(self) -> str:
        return f"<Producer {self.group} {self.instance.client_id}>"

    # -- lifetime -------------------------------------------------------------------------

    @asynccontextmanager
    async def _lifecycle(self) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if self._own_instance:
                await stack.enter_async_context(self.instance.running())
            self.instance.add_producer(self.group, self)
            try:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    # trio.current_time's clock, read without its three calls (plain sends)
                    self._clock = trio.lowlevel.current_clock().current_time
                    if self.tracer is not None:
                        await nursery.start(self.tracer.run)
                    try:
                        yield
                    finally:
                        self._nursery = None
                        if self.tracer is not None:
                            self.tracer.stop()
            finally:
                if self.instance.remove(self, self.group):
                    await self.instance.unregister(self.group, None)

    def _check_running(self) -> None:
        if self._nursery is None or not self.instance.running_now:
            raise MQClientStateError(f"producer {self.group} is not running: use it in `async with`")

    # -- Member (instance callbacks) ------------------------------------------------------

    def route_topics(self) -> list[str]:
        return list(self._publish)

    def on_route(self, topic: str, route: TopicRoute) -> None:
        info = self._publish.get(topic)
        if info is None or info.route == route:
            return
        if self._faults is not None:
            # a group whose master moved (an election, a restart elsewhere) is judged afresh:
            # the failures on record were its old master's
            for bd in route.broker_datas:
                old = info.route.broker(bd.broker_name)
                if old is not None and bd.master_addr not in (None, old.master_addr):
                    self._faults.remove(bd.broker_name)
        # also when it has no queue left: a group whose master is gone has none (sends only
        # ever go to masters), and the next send asks the name servers again
        self._publish[topic] = PublishInfo(topic, route)

    # -- sending --------------------------------------------------------------------------

    async def send(
        self,
        msg: ProtocolMessage,
        *,
        timeout: float | None = None,  # noqa: ASYNC109  public API
        queue: MessageQueue | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
    ) -> SendResult:
        """Send `msg` and wait for the broker's answer.

        Args:
          timeout: overall limit in seconds, retries included (default send_timeout, 3 s).
          queue: send to exactly this queue (no retry elsewhere).
          selector: pick the queue with `selector(queues, msg, arg)` (ordered sends; no
            retry elsewhere).

        Returns:
          The SendResult. A status other than SEND_OK (flush or slave trouble) means the
          broker stored the message but could not honour the durability asked for.

        Raises:
          MQMessageError: invalid message. MQNoRouteError: no route for the topic.
          MQTimeoutError: no answer within the time limit (names the broker).
          MQBrokerError: the broker refused the message (code and remark).
          MQConnectError: the last broker tried could not be reached.

        Cancellation: the message may or may not have been stored.
        """
        self._check_running()
        check_message(msg, self.config.max_message_size)
        if self.tracer is not None:
            return await self._traced_send(msg, timeout, queue, selector, arg)
        if queue is None and selector is None:
            batcher = self._batcher
            if batcher is None:
                return await self._send_plain(msg, timeout)
            if batchable(msg, self.config.compress_over):
                # AutoBatcher.send, with its lone send's two coroutine layers left out
                alone = batcher.hold_alone(msg)
                if alone is None:
                    return await batcher.send(msg, self.config.send_timeout if timeout is None else timeout)
                try:
                    return await self._send_plain(msg, timeout)
                finally:
                    batcher.release(alone)
        return await self._send_one(msg, timeout, queue, selector, arg)

    async def _send_one(
        self,
        msg: ProtocolMessage,
        timeout: float | None,  # noqa: ASYNC109  retry budget, see _send_outgoing
        queue: MessageQueue | None,
        selector: Any,
        arg: Any,
    ) -> SendResult:
        """A sync send: through the auto batcher when it is on and the message may be batched."""
        if queue is None and selector is None:
            batcher = self._batcher
            if batcher is not None and batchable(msg, self.config.compress_over):
                return await batcher.send(msg, self.config.send_timeout if timeout is None else timeout)
            if self.tracer is None:
                return await self._send_plain(msg, timeout)
        result = await self._send(msg, timeout, queue, selector, arg, oneway=False)
        assert result is not None
        return result

    async def _send_as_batch(self, msgs: Sequence[ProtocolMessage], timeout: float) -> SendResult:  # noqa: ASYNC109  retry budget, see _send_outgoing
        """The auto batcher's way out: one SEND_BATCH_MESSAGE, one attempt (when it fails, the
        batcher sends each message again on its own). One message (a lone send, or one of a
        batch that failed): a plain send, retries included, the flat one where it may."""
        if len(msgs) == 1:
            if self.tracer is None:
                return await self._send_plain(msgs[0], timeout)
            out = _Outgoing(msgs[0], self.config.compress_over, self._ids, self.config.compress_type)
            retry = True
        else:
            out = _Outgoing.batch_of(msgs, self._ids)
            retry = False
        result = await self._send_outgoing(out, timeout, None, None, None, msgs[0], oneway=False, retry=retry)
        assert result is not None
        return result

    async def _traced_send(
        self,
        msg: ProtocolMessage,
        timeout: float | None,  # noqa: ASYNC109  retry budget, see _send_outgoing
        queue: MessageQueue | None,
        selector: Any,
        arg: Any,
    ) -> SendResult:
        assert self.tracer is not None
        start = trio.current_time()
        result = None
        try:
            result = await self._send_one(msg, timeout, queue, selector, arg)
            return result
        finally:
            host = self.instance.master_addr(result.message_queue.broker_name) or "" if result else ""
            self.tracer.published(msg, result, trio.current_time() - start, host)  # type: ignore[arg-type]

    async def request(self, msg: ProtocolMessage, *, timeout: float | None = None) -> MessageExt:  # noqa: ASYNC109  public API
        """Send `msg` as a request and wait for its reply (request-reply; see reply.py).

        A replier answers with `reply(request, body)`; the broker pushes the reply to this
        producer's connection.

        Args:
          timeout: seconds for the send and the reply together (default send_timeout, 3 s).

        Returns:
          The reply message (its ARRIVE_TIME property is when it came).

        Raises:
          MQTimeoutError: no reply in time. As `send` for the request's own send.
        """
        self._check_running()
        check_message(msg, self.config.max_message_size)
        return await _request(self, msg, self.config.send_timeout if timeout is None else timeout)

    async def reply(
        self,
        request: ProtocolMessage,
        body: bytes | str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109  public API
    ) -> SendResult:
        """Answer `request`, a request message this process received, with `body`.

        Raises MQClientError when `request` was not received from a broker (no CLUSTER
        property); MQBrokerError SYSTEM_ERROR when the broker could not push the reply to
        the requester (gone, or it refused it); otherwise as `send`.
        """
        return await self.send(reply_message(request, body), timeout=timeout)

    async def send_orderly(
        self,
        msg: ProtocolMessage,
        sharding_key: Any,
        *,
        timeout: float | None = None,  # noqa: ASYNC109  public API
    ) -> SendResult:
        """Send to the queue chosen by the Java hash of `sharding_key`: messages with one key
        keep their order (SelectMessageQueueByHash)."""
        return await self.send(msg, timeout=timeout, selector=select_by_hash, arg=sharding_key)

    async def send_oneway(
        self,
        msg: ProtocolMessage,
        *,
        timeout: float | None = None,  # noqa: ASYNC109  public API
        queue: MessageQueue | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        """Send `msg` without waiting for an answer (one attempt; the broker does not reply).

        Returns once the request is queued on the connection.
        """
        self._check_running()
        check_message(msg, self.config.max_message_size)
        await self._send(msg, timeout, queue, selector, arg, oneway=True)

    async def send_async(
        self,
        msg: ProtocolMessage,
        callback: SendCallback | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109  public API
        queue: MessageQueue | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        """Start sending `msg` in the producer's nursery and return.

        `callback` is called with the SendResult, or with the MQClientError the send
        failed with (it may be a plain function or an async one; its own exceptions are
        logged). Returns at once unless `max_async_in_flight` sends are already running,
        then waits for one to finish. Leaving `async with` waits for every started send.

        Raises MQMessageError at once for an invalid message.
        """
        self._check_running()
        check_message(msg, self.config.max_message_size)
        await self._async_slots.acquire()
        try:
            assert self._nursery is not None
            self._nursery.start_soon(self._async_task, msg, callback, timeout, queue, selector, arg)
        except BaseException:
            self._async_slots.release()
            raise

    async def _async_task(
        self,
        msg: ProtocolMessage,
        callback: SendCallback | None,
        timeout: float | None,  # noqa: ASYNC109  retry budget, see _send_outgoing
        queue: MessageQueue | None,
        selector: QueueSelector | None,
        arg: Any,
    ) -> None:
        try:
            outcome: SendResult | MQClientError
            try:
                outcome = await self._send_one(msg, timeout, queue, selector, arg)
            except MQClientError as exc:
                outcome = exc
            if callback is None:
                if isinstance(outcome, MQClientError):
                    log.warning("async send to %s failed: %s", msg.topic, outcome)
                return
            try:
                ret = callback(outcome)
                if inspect.isawaitable(ret):
                    await ret
            except Exception:
                log.exception("send callback failed")
        finally:
            self._async_slots.release()

    async def send_batch(self, msgs: Sequence[ProtocolMessage], *, timeout: float | None = None) -> list[SendResult]:  # noqa: ASYNC109  public API
        """Send messages of one topic as batches (SEND_BATCH_MESSAGE), cut to fit
        `max_message_size`; returns one SendResult per batch sent, in order.

        Each batch is retried like a sync send; if one fails the error is raised and
        the later batches are not sent.
        """
        self._check_running()
        check_batch(msgs)
        results = []
        for part in split_batch(msgs, self.config.max_message_size, self._ids.length):
            out = _Outgoing.batch_of(part, self._ids)
            result = await self._send_outgoing(out, timeout, None, None, None, part[0], oneway=False)
            assert result is not None
            results.append(result)
        return results

    # -- the send path --------------------------------------------------------------------

    async def _send(
        self,
        msg: ProtocolMessage,
        timeout: float | None,  # noqa: ASYNC109  retry budget, see _send_outgoing
        queue: MessageQueue | None,
        selector: QueueSelector | None,
        arg: Any,
        *,
        oneway: bool,
    ) -> SendResult | None:
        out = _Outgoing(msg, self.config.compress_over, self._ids, self.config.compress_type)
        return await self._send_outgoing(out, timeout, queue, selector, arg, msg, oneway=oneway)

    async def _send_plain(
        self,
        msg: ProtocolMessage,
        timeout: float | None,  # noqa: ASYNC109  retry budget, see _send_outgoing
    ) -> SendResult:
        """A sync send with no queue or selector: its first attempt made here, flat, when the
        message is plain (see the module docstring); anything else, and what follows a failed
        attempt, goes through `_send_outgoing`."""
        config = self.config
        topic, props = msg.topic, msg.properties
        limit = config.send_timeout if timeout is None else timeout
        info = self._publish.get(topic)
        api = self.instance.api
        if (
            info is None
            or not info.queues
            or limit <= 0
            or api.credentials is not None
            or len(msg.body) >= config.compress_over
            or type(msg.flag) is not int
            or P.MSG_TYPE in props  # a reply, perhaps
            or topic.startswith(RETRY_PREFIX)
        ):
            return await self._send_general(msg, timeout)
        start = self._clock()
        faults = self._faults
        if faults is not None and faults.unavailable_until > start:
            return await self._send_general(msg, timeout)
        # PublishInfo.select's choice while every broker is available
        queues = info.queues
        index = info.next_index() % len(queues)
        mq = queues[index]
        addr = self.instance.master_addr(mq.broker_name)
        if addr is None:
            return await self._send_general(msg, timeout)
        template = info.templates[index]
        if template is None:
            template = info.templates[index] = SendTemplate(
                self.group, mq, config.create_topic_key, config.default_topic_queue_nums
            )
        msg_id = props.get(P.UNIQ_KEY)
        if not msg_id:
            msg_id = props[P.UNIQ_KEY] = self._ids.next_id()
        request = SendRequest(template, wall_clock_ms(), msg.flag, P.encode_properties(props), msg.body)
        # what ClientAPI.invoke and RemotingClient.invoke do, on the open connection if any
        remoting = api.remoting
        conn = remoting.connected(addr)
        error: MQClientError | None = None
        result: SendResult | None = None
        try:
            if conn is None:
                response = await remoting.invoke(addr, request, limit)
            else:
                try:
                    response = await conn.invoke(request, limit)
                except RemotingSendRequestError:  # closed meanwhile; nothing went out
                    response = await remoting.invoke(addr, request, limit)
            result = send_result(response, addr, mq, msg_id)
        except RemotingError as exc:
            error = translate_remoting_error(exc, trio.current_time() - start)
        except ProtocolError as exc:
            error = MQClientError(f"cannot send {request.code} to {addr}: {exc}")
        except MQClientError as exc:
            error = exc
        if faults is not None:  # _record_latency, inline
            end = self._clock()
            faults.update(mq.broker_name, end - start, isolation=error is not None, now=end)
        if result is not None and (
            result.status is SendStatus.SEND_OK or not config.retry_another_broker_when_not_store_ok
        ):
            return result
        out = _Outgoing(msg, config.compress_over, self._ids, config.compress_type)
        retried = await self._send_outgoing(
            out, timeout, None, None, None, msg, oneway=False, made=(start, mq, result, error)
        )
        assert retried is not None
        return retried

    async def _send_general(self, msg: ProtocolMessage, timeout: float | None) -> SendResult:  # noqa: ASYNC109  retry budget, see _send_outgoing
        result = await self._send(msg, timeout, None, None, None, oneway=False)
        assert result is not None
        return result

    async def _send_outgoing(
        self,
        out: _Outgoing,
        # A budget, not a cancel scope: the attempts share it as a deadline their requests
        # carry, so a timeout is an MQTimeoutError naming the broker and a retry gets the rest.
        timeout: float | None,  # noqa: ASYNC109
        queue: MessageQueue | None,
        selector: QueueSelector | None,
        arg: Any,
        msg: ProtocolMessage,
        *,
        oneway: bool,
        made: tuple[float, MessageQueue, SendResult | None, MQClientError | None] | None = None,
        retry: bool = True,
    ) -> SendResult | None:
        """`made`: (start, queue, result, error) of the first attempt, made by `_send_plain`;
        the retries go on from there. `retry`: False for one attempt only (an auto batch)."""
        limit = self.config.send_timeout if timeout is None else timeout
        start = trio.current_time() if made is None else made[0]
        deadline = start + limit
        # one clock reading serves the first attempt's checks too (a reading costs about
        # 0.3 µs, and a send used to take ten)
        now: float | None = start if made is None else None
        info = self._publish.get(out.topic)
        if info is None or not info.queues:  # first send to the topic: ask the name servers
            info = await self._publish_info(out.topic, deadline)
            now = None
        if queue is not None or selector is not None:
            if queue is not None and queue.topic != out.topic:
                raise MQMessageError(f"the message topic {out.topic} differs from the queue's {queue}")
            if queue is None:
                assert selector is not None
                if not info.queues:
                    raise MQNoRouteError(out.topic, self.instance.namesrv, "no writable queue")
                queue = selector(info.queues, msg, arg)
            try:
                return await self._attempt(out, queue, deadline, start, oneway, now)
            except MQClientError as exc:
                if is_retriable(exc):  # no retry elsewhere, but the next send finds a moved master
                    self.instance.refresh_route_soon(out.topic)
                raise
        attempts = 1 if oneway or not retry else 1 + self.config.retry_times
        last_broker: str | None = None
        last_error: MQClientError | None = None
        not_ok: SendResult | None = None
        for _ in range(attempts):
            result: SendResult | None = None
            error: MQClientError | None = None
            if made is not None:  # the first attempt's outcome
                _, mq, result, error = made
                made = None
            else:
                if now is None:
                    now = trio.current_time()
                if now >= deadline:
                    break
                # a route refresh during the last attempt may have taken queues away (a master
                # gone): choose among the current ones
                info = self._publish.get(out.topic, info)
                try:
                    mq = info.select(last_broker, self._faults, now)
                except IndexError:
                    raise MQNoRouteError(out.topic, self.instance.namesrv, "no writable queue") from None
                watched = False
                faults = self._faults
                if (
                    faults is not None
                    and faults.unavailable_until > now
                    and not faults.is_available(mq.broker_name, now)
                ):
                    # only brokers that failed lately are left (a hung master, its group's
                    # election under way): see what the route says first, and while waiting
                    # for the answer
                    refresh = self.instance.refreshes.get(out.topic)
                    if refresh is not None:
                        with trio.move_on_at(deadline):
                            await refresh.wait()
                        now = trio.current_time()
                        info = self._publish.get(out.topic, info)
                        mq = self._select(info, last_broker, now)
                    watched = not faults.is_available(mq.broker_name, now)
                try:
                    if watched:
                        result = await self._attempt_watching_route(out, mq, deadline, start, oneway, now)
                    else:
                        result = await self._attempt(out, mq, deadline, start, oneway, now)
                except MQClientError as exc:
                    error = exc
            last_broker = mq.broker_name
            if error is not None:
                if not is_retriable(error):
                    raise error
                log.info("send to %s failed, %s", mq, error)
                last_error = error
                # the master may have moved (a DLedger group elected another): ask again now
                # rather than at the next periodic refresh. The refresh runs in the instance's
                # nursery: when this send's time is up (a timeout uses all of it) it still
                # serves the next send.
                refreshed = self.instance.refresh_route_soon(out.topic)
                if not retry:  # the caller goes on from here (an auto batch: one send a message)
                    raise error
                with trio.move_on_at(deadline):
                    await refreshed.wait()
                now = None
                continue
            if (
                result is not None
                and result.status is not SendStatus.SEND_OK
                and self.config.retry_another_broker_when_not_store_ok
            ):
                not_ok = result
                now = None
                continue
            return result
        if not_ok is not None:
            return not_ok
        elapsed = trio.current_time() - start
        if last_error is None or (elapsed >= limit and not isinstance(last_error, MQTimeoutError)):
            addr = self.instance.master_addr(last_broker) if last_broker else None
            raise MQTimeoutError(addr or str(last_broker), elapsed, "send")
        raise last_error

    def _select(self, info: PublishInfo, last_broker: str | None, now: float) -> MessageQueue:
        try:
            return info.select(last_broker, self._faults, now)
        except IndexError:
            raise MQNoRouteError(info.topic, self.instance.namesrv, "no writable queue") from None

    async def _attempt_watching_route(
        self, out: _Outgoing, mq: MessageQueue, deadline: float, start: float, oneway: bool, now: float | None
    ) -> SendResult | None:
        """`_attempt` on a broker that failed lately, made because no other is left. While it
        waits, the topic's route is fetched every ROUTE_RETRY_INTERVAL; once it names another
        master for the broker (its DLedger group elected one) or offers a broker that has not
        failed lately, the attempt is given up for a retry there: raises MQConnectError."""
        addr = self.instance.master_addr(mq.broker_name)
        if addr is None:
            return await self._attempt(out, mq, deadline, start, oneway, now)
        better: str | None = None
        done = False
        result: SendResult | None = None
        error: MQClientError | None = None
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal better
                while better is None:
                    await self.instance.refresh_route_soon(out.topic).wait()
                    better = self._better_than(out.topic, mq.broker_name, addr)
                    if better is None:
                        await trio.sleep(ROUTE_RETRY_INTERVAL)
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            try:  # the outcome leaves after the nursery, so that it is not wrapped in a group
                result = await self._attempt(out, mq, deadline, start, oneway, now)
                done = True
            except MQClientError as exc:
                error = exc
            finally:
                nursery.cancel_scope.cancel()
        if error is not None:
            raise error
        if done:
            return result
        raise MQConnectError(addr, f"given up for {better}, which the route now offers")

    def _better_than(self, topic: str, broker_name: str, addr: str) -> str | None:
        """Where a send waiting on `addr`, the master of `broker_name` that failed lately, would
        go now: the group's new master, or a broker of the topic that has not failed lately."""
        master = self.instance.master_addr(broker_name)
        if master is not None and master != addr:
            return master
        info = self._publish.get(topic)
        if info is None or self._faults is None:
            return None
        for name in {q.broker_name for q in info.queues} - {broker_name}:
            if self._faults.is_available(name):
                return self.instance.master_addr(name)
        return None

    async def _attempt(
        self, out: _Outgoing, mq: MessageQueue, deadline: float, start: float, oneway: bool, now: float | None
    ) -> SendResult | None:
        """One request to the master of `mq`'s broker; records latency for fault avoidance.

        `now` is the clock as the caller last read it, None to read it here."""
        addr = self.instance.master_addr(mq.broker_name)
        if addr is None:
            await self.instance.update_route(out.topic)
            now = None
            addr = self.instance.master_addr(mq.broker_name)
            if addr is None:
                raise MQClientError(f"the broker {mq.broker_name} does not exist (topic {out.topic})")
        t0 = trio.current_time() if now is None else now
        remaining = deadline - t0
        if remaining <= 0:
            raise MQTimeoutError(addr, t0 - start, "send")
        header = SendMessageRequestHeader(
            producer_group=self.group,
            topic=out.topic,
            default_topic=self.config.create_topic_key,
            default_topic_queue_nums=self.config.default_topic_queue_nums,
            queue_id=mq.queue_id,
            sys_flag=out.sys_flag,
            born_timestamp=wall_clock_ms(),
            flag=out.flag,
            properties=out.properties,
            reconsume_times=out.reconsume_times or 0,
            unit_mode=False,
            max_reconsume_times=out.max_reconsume,
            batch=out.batch,
        )
        if out.batch:
            code = RequestCode.SEND_BATCH_MESSAGE
        else:
            code = RequestCode.SEND_REPLY_MESSAGE_V2 if out.reply else RequestCode.SEND_MESSAGE_V2
        try:
            result = await self.instance.api.send_message(
                addr, mq.broker_name, code, header, out.body, out.msg_id, remaining, oneway=oneway
            )
        except MQClientError:
            self._record_latency(mq.broker_name, t0, failed=True)
            raise
        self._record_latency(mq.broker_name, t0, failed=False)
        return result

    def _record_latency(self, broker_name: str, t0: float, *, failed: bool) -> None:
        """The send that began at `t0` has ended: its latency for fault avoidance."""
        if self._faults is not None:
            end = trio.current_time()
            self._faults.update(broker_name, end - t0, isolation=failed, now=end)

    async def _publish_info(self, topic: str, deadline: float = float("inf")) -> PublishInfo:
        """The topic's publish queues, looked up (or derived from TBW102) when unknown.

        Raises MQNoRouteError, or MQTimeoutError when the name servers take past `deadline`.
        """
        info = self._publish.get(topic)
        if info is not None and info.queues:
            return info
        start = trio.current_time()
        with trio.move_on_at(deadline):
            return await self._lookup_publish_info(topic)
        raise MQTimeoutError(",".join(self.instance.namesrv), trio.current_time() - start, "route lookup")

    async def _lookup_publish_info(self, topic: str) -> PublishInfo:
        async with self._route_lock:
            info = self._publish.get(topic)
            if info is not None and info.queues:
                return info
            route = await self.instance.fetch_route(topic)
            if route is not None and route.publish_queues(topic):
                info = PublishInfo(topic, route)
            elif route is not None and route.broker_datas:
                # the topic exists, but no group of it has a master (or none is writable):
                # a slave takes no message, and the default topic must not create it elsewhere
                self.instance.store_route(topic, route)
                raise MQNoRouteError(topic, self.instance.namesrv, "no writable queue (no master)")
            else:
                default = await self.instance.fetch_route(self.config.create_topic_key)
                if default is None or not default.publish_queues(topic):
                    raise MQNoRouteError(topic, self.instance.namesrv)
                route = default.with_queue_limit(self.config.default_topic_queue_nums)
                info = PublishInfo(topic, route, from_default_topic=True)
            self._publish[topic] = info
            self.instance.store_route(topic, route)
        return info

    async def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's writable queues (for choosing a queue yourself)."""
        self._check_running()
        return list((await self._publish_info(topic)).queues)


@asynccontextmanager
async def open_producer(
    group: str = DEFAULT_PRODUCER_GROUP, namesrv: str | Sequence[str] | None = None, **options: Unpack[ProducerOptions]
) -> AsyncIterator[Producer]:
    """`async with open_producer(group, namesrv=...) as producer:` (same as `Producer`)."""
    async with Producer(group, namesrv, **options) as producer:
        yield producer


__all__ = ["MQMessageError", "Producer", "SendCallback", "open_producer"]

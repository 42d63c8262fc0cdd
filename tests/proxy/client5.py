"""Child process: the official RocketMQ 5.x Python client (rocketmq-python-client) against a
proxy. Run with PYTHONPATH holding only that client and its dependencies (its import name,
`rocketmq`, is the C++ client's too). Prints one JSON object per line; the last one ends
with "done". Usage: client5.py ENDPOINT SCENARIO TOPIC GROUP [N [SECONDS]], SECONDS how long
a receive waits for N messages (30), or how far off a delayed message is due."""

from __future__ import annotations

import json
import os
import sys
import time


def out(**values: object) -> None:
    print(json.dumps(values), flush=True)


def main() -> None:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer
    from rocketmq.v5.exception.client_exception import BadRequestException

    endpoint, scenario, topic, group = sys.argv[1:5]
    n = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    wait = float(sys.argv[6]) if len(sys.argv) > 6 else 30
    # CLIENT5_AK / CLIENT5_SK: the client's ACL credentials (it signs every call with them)
    credentials = Credentials(os.environ.get("CLIENT5_AK", ""), os.environ.get("CLIENT5_SK", ""))
    config = ClientConfiguration(endpoint, credentials)
    # CLIENT5_TLS=1: the client's TLS channel, trusting GRPC_DEFAULT_SSL_ROOTS_FILE_PATH's CAs
    tls = os.environ.get("CLIENT5_TLS") == "1"

    if scenario == "send":
        producer = Producer(config, (topic,), tls_enable=tls)
        producer.startup()
        try:
            for i in range(n):
                msg = Message()
                msg.topic = topic
                msg.body = f"body-{i}".encode()
                msg.tag = "TagA"
                msg.keys = f"key-{i}"
                msg.add_property("index", str(i))
                if i % 2:
                    msg.message_group = "group-1"  # a FIFO message
                receipt = producer.send(msg)
                out(sent=receipt.message_id)
        finally:
            producer.shutdown()
    elif scenario in ("kinds_sync", "kinds_async"):
        # N messages of each kind: normal, FIFO (two message groups), delay (due in SECONDS),
        # and with sync sends transactional ones, committed (the client has no async
        # transactional send)
        from rocketmq import TransactionChecker, TransactionResolution

        class CommitAll(TransactionChecker):
            def check(self, message: Message) -> TransactionResolution:
                return TransactionResolution.COMMIT

        mode = scenario.removeprefix("kinds_")
        producer = Producer(config, (topic,), CommitAll())
        producer.startup()
        try:
            pending = []
            for i in range(n):
                for kind in ("normal", "fifo", "delay", "tx"):
                    msg = Message()
                    msg.topic = topic
                    msg.body = f"{mode}-{kind}-{i}".encode()
                    msg.tag = kind
                    due = None
                    if kind == "fifo":
                        msg.message_group = f"{mode}-g{i % 2}"
                    elif kind == "delay":
                        # the client sends delivery_timestamp as seconds (and reads it back as ms)
                        due_s = int(time.time() + wait + 1)
                        msg.delivery_timestamp = due_s
                        due = due_s * 1000
                    if kind == "tx":
                        if mode == "async":
                            continue
                        transaction = producer.begin_transaction()
                        receipt = producer.send(msg, transaction)
                        transaction.commit()
                    elif mode == "sync":
                        receipt = producer.send(msg)
                    else:
                        pending.append((kind, msg.body.decode(), due, producer.send_async(msg)))
                        continue
                    out(sent=receipt.message_id, kind=kind, body=msg.body.decode(), due=due)
            for kind, body, due, future in pending:
                out(sent=future.result(timeout=30).message_id, kind=kind, body=body, due=due)
        finally:
            producer.shutdown()
    elif scenario == "push":
        # a PushConsumer until it has consumed N distinct bodies "p-<i>" (i < N) or SECONDS
        # passed, then 2 s more for redeliveries; counts, not the messages (N may be 10,000)
        import threading

        from rocketmq import ConsumeResult, MessageListener, PushConsumer

        lock = threading.Lock()
        seen: set[str] = set()
        counts = {"total": 0, "unexpected": 0}
        expected = {f"p-{i}" for i in range(n)}
        all_seen = threading.Event()

        class Count(MessageListener):
            def consume(self, message: Message) -> ConsumeResult:
                body = message.body.decode()
                with lock:
                    counts["total"] += 1
                    if body in expected:
                        seen.add(body)
                    else:
                        counts["unexpected"] += 1
                    if len(seen) == n:
                        all_seen.set()
                return ConsumeResult.SUCCESS

        consumer = PushConsumer(config, group, Count(), {topic: FilterExpression()})
        started = time.monotonic()
        consumer.startup()
        try:
            out(started=True)
            all_seen.wait(wait)
            took = time.monotonic() - started
            time.sleep(2)
        finally:
            consumer.shutdown()
        with lock:
            out(distinct=len(seen), total=counts["total"], unexpected=counts["unexpected"], seconds=round(took, 1))
    elif scenario == "never_ack":
        # receive with a 1 s invisible time and never ack, until N deliveries or SECONDS
        # passed, then 4 s more to see whether it comes again
        consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=2)
        consumer.startup()
        try:
            got = 0
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                for msg in consumer.receive(16, 1):
                    got += 1
                    out(id=msg.message_id, body=msg.body.decode(), attempt=msg.delivery_attempt)
                if got >= n:
                    deadline = min(deadline, time.monotonic() + 4)
                    n = 1 << 30
        finally:
            consumer.shutdown()
    elif scenario == "send_paced":
        # up to N sends, one every 20 ms, for at most SECONDS or until stdin ends; a failed
        # send is printed and the next one goes on (a test kills brokers meanwhile)
        import select

        producer = Producer(config, (topic,), tls_enable=tls)
        producer.startup()
        try:
            end = time.monotonic() + wait
            for i in range(n):
                if time.monotonic() > end or select.select([sys.stdin], [], [], 0)[0]:
                    break
                msg = Message()
                msg.topic = topic
                msg.body = f"body-{i}".encode()
                try:
                    receipt = producer.send(msg)
                except Exception as exc:  # the client's own retries are over
                    out(failed=i, error=f"{type(exc).__name__}: {exc}"[:300])
                else:
                    out(sent=receipt.message_id, i=i)
                time.sleep(0.02)
        finally:
            producer.shutdown()
    elif scenario in ("commit", "rollback", "check"):
        # a half message, then commit or rollback; "check": neither, the broker's check
        # reaches the checker (through the proxy's Telemetry stream), which commits
        import threading

        from rocketmq import TransactionChecker, TransactionResolution

        checked = threading.Event()

        class Checker(TransactionChecker):
            def check(self, message: Message) -> TransactionResolution:
                out(checked=message.message_id, body=message.body.decode())
                checked.set()
                return TransactionResolution.COMMIT

        producer = Producer(config, (topic,), Checker())
        producer.startup()
        try:
            transaction = producer.begin_transaction()
            msg = Message()
            msg.topic = topic
            msg.body = f"tx-{scenario}".encode()
            receipt = producer.send(msg, transaction)
            out(sent=receipt.message_id)
            if scenario == "commit":
                out(ended=transaction.commit().status.code)
            elif scenario == "rollback":
                out(ended=transaction.rollback().status.code)
            else:
                out(was_checked=checked.wait(30))
                time.sleep(1)  # the checker's EndTransaction goes out after check() returns
        finally:
            producer.shutdown()
    elif scenario == "forward_dlq":
        # the SimpleConsumer has no dead-letter forward (only the PushConsumer's FIFO discard
        # uses it), so the client's own stub asks for it with a received message's handle
        import grpc
        from rocketmq.grpc_protocol import ForwardMessageToDeadLetterQueueRequest, MessagingServiceStub

        consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=2)
        consumer.startup()
        try:
            messages = []
            deadline = time.monotonic() + 30
            while not messages and time.monotonic() < deadline:
                messages = consumer.receive(1, 2)
            msg = messages[0]
            request = ForwardMessageToDeadLetterQueueRequest(
                receipt_handle=msg.receipt_handle, message_id=msg.message_id, delivery_attempt=1
            )
            request.group.name = group
            request.topic.name = topic
            with grpc.insecure_channel(endpoint) as channel:
                response = MessagingServiceStub(channel).ForwardMessageToDeadLetterQueue(
                    request, metadata=consumer.sign()
                )
            out(id=msg.message_id, code=response.status.code)
            # acked by the forward: not back after its invisible time (2 s)
            again = 0
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline:
                again += len(consumer.receive(1, 2))
            out(again=again)
        finally:
            consumer.shutdown()
    elif scenario == "pull":
        # no 5.x client has a PullConsumer yet: the offset RPCs and PullMessage with the stub
        import grpc
        from google.protobuf.duration_pb2 import Duration
        from google.protobuf.timestamp_pb2 import Timestamp
        from rocketmq.grpc_protocol import MessagingServiceStub
        from rocketmq.grpc_protocol import definition_pb2 as d5
        from rocketmq.grpc_protocol import service_pb2 as s5

        meta = [("x-mq-client-id", "probe")]
        with grpc.insecure_channel(endpoint) as channel:
            stub = MessagingServiceStub(channel)
            route = stub.QueryRoute(s5.QueryRouteRequest(topic=d5.Resource(name=topic)), metadata=meta)
            [queue] = [q for q in route.message_queues if q.id == 0]
            for policy in ("BEGINNING", "END"):
                request = s5.QueryOffsetRequest(
                    message_queue=queue, query_offset_policy=d5.QueryOffsetPolicy.Value(policy)
                )
                out(query=policy, offset=stub.QueryOffset(request, metadata=meta).offset)
            at = s5.QueryOffsetRequest(message_queue=queue, query_offset_policy=d5.TIMESTAMP)
            at.timestamp.CopyFrom(Timestamp(seconds=0))
            out(query="TIMESTAMP", offset=stub.QueryOffset(at, metadata=meta).offset)

            def get_offset() -> None:
                answer = stub.GetOffset(
                    s5.GetOffsetRequest(group=d5.Resource(name=group), message_queue=queue), metadata=meta
                )
                out(get=answer.status.code, offset=answer.offset)

            def pull(offset: int, tag: str = "*") -> None:
                request = s5.PullMessageRequest(
                    group=d5.Resource(name=group),
                    message_queue=queue,
                    offset=offset,
                    batch_size=32,
                    filter_expression=d5.FilterExpression(expression=tag),
                    long_polling_timeout=Duration(seconds=1),
                )
                codes, bodies, next_offset = [], [], None
                for answer in stub.PullMessage(request, metadata=meta, timeout=10):
                    kind = answer.WhichOneof("content")
                    if kind == "status":
                        codes.append(answer.status.code)
                    elif kind == "message":
                        bodies.append(answer.message.body.decode())
                    else:
                        next_offset = answer.next_offset
                out(pull=offset, tag=tag, codes=codes, bodies=bodies, next=next_offset)

            get_offset()
            pull(0)
            pull(0, "TagB")
            update = s5.UpdateOffsetRequest(group=d5.Resource(name=group), message_queue=queue, offset=n)
            out(update=stub.UpdateOffset(update, metadata=meta).status.code)
            get_offset()
            pull(n)
            pull(n + 100)
    elif scenario == "pull_retrying":
        # PullMessage of every queue of the route from offset 0 with the stub, a failed call
        # (a broker gone in a failover) reported and made again, until N messages or SECONDS
        import grpc
        from google.protobuf.duration_pb2 import Duration
        from rocketmq.grpc_protocol import MessagingServiceStub
        from rocketmq.grpc_protocol import definition_pb2 as d5
        from rocketmq.grpc_protocol import service_pb2 as s5

        meta = [("x-mq-client-id", "probe")]
        deadline = time.monotonic() + wait
        bodies: set[str] = set()
        failures = 0
        with grpc.insecure_channel(endpoint) as channel:
            stub = MessagingServiceStub(channel)
            route = stub.QueryRoute(s5.QueryRouteRequest(topic=d5.Resource(name=topic)), metadata=meta)
            queues = list(route.message_queues)
            while len(bodies) < n and time.monotonic() < deadline:
                for queue in queues:
                    request = s5.PullMessageRequest(
                        group=d5.Resource(name=group),
                        message_queue=queue,
                        offset=0,
                        batch_size=32,
                        filter_expression=d5.FilterExpression(expression="*"),
                        long_polling_timeout=Duration(seconds=1),
                    )
                    try:
                        for answer in stub.PullMessage(request, metadata=meta, timeout=10):
                            kind = answer.WhichOneof("content")
                            if kind == "status" and answer.status.code not in (20000, 40401):
                                failures += 1
                                out(pull_failed=answer.status.code, message=answer.status.message[:200])
                            elif kind == "message":
                                bodies.add(answer.message.body.decode())
                    except grpc.RpcError as exc:
                        failures += 1
                        out(pull_failed=str(exc.code()))
                if len(bodies) < n:
                    time.sleep(0.2)
        out(pulled=len(bodies), failures=failures)
    elif scenario in ("send_refused", "receive_refused"):
        # a client whose start or first call is refused: the Status of a QueryRoute signed as
        # the client signs (its start hides it), then what the client raised
        import grpc
        from rocketmq.grpc_protocol import MessagingServiceStub, QueryRouteRequest, Resource
        from rocketmq.v5.util.signature import Signature

        with grpc.insecure_channel(endpoint) as channel:
            request = QueryRouteRequest(topic=Resource(name=topic))
            response = MessagingServiceStub(channel).QueryRoute(request, metadata=Signature.metadata(config, "probe"))
            out(route=response.status.code, message=response.status.message)
        client = None
        try:
            if scenario == "send_refused":
                client = Producer(config, (topic,))
                client.startup()
                msg = Message()
                msg.topic = topic
                msg.body = b"x"
                client.send(msg)
            else:
                client = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=2)
                client.startup()
                client.receive(1, 2)
            out(error=None)
        except Exception as exc:
            out(error=type(exc).__name__, code=getattr(exc, "code", None), text=str(exc))
        finally:
            if client is not None and client.is_running:
                client.shutdown()
    elif scenario == "send_error":
        producer = Producer(config)
        producer.startup()
        try:
            msg = Message()
            msg.topic = topic
            msg.body = b"x"
            producer.send(msg)
            out(error=None)
        except Exception as exc:
            out(error=type(exc).__name__, code=getattr(exc, "code", None), text=str(exc))
        finally:
            producer.shutdown()
    elif scenario == "query_route":
        # the client's own stub, to see the Status the client library checks
        import grpc
        from rocketmq.grpc_protocol import MessagingServiceStub, QueryRouteRequest, Resource

        with grpc.insecure_channel(endpoint) as channel:
            request = QueryRouteRequest(topic=Resource(name=topic))
            response = MessagingServiceStub(channel).QueryRoute(request, metadata=[("x-mq-client-id", "probe")])
            out(code=response.status.code, message=response.status.message, queues=len(response.message_queues))
    elif scenario == "route":
        # each queue QueryRoute lists, with the client's stub
        import grpc
        from rocketmq.grpc_protocol import MessagingServiceStub, QueryRouteRequest, Resource
        from rocketmq.grpc_protocol import definition_pb2 as d5

        with grpc.insecure_channel(endpoint) as channel:
            request = QueryRouteRequest(topic=Resource(name=topic))
            response = MessagingServiceStub(channel).QueryRoute(request, metadata=[("x-mq-client-id", "probe")])
            for q in response.message_queues:
                addrs = [f"{a.host}:{a.port}" for a in q.broker.endpoints.addresses]
                perm = d5.Permission.Name(q.permission)
                out(broker=q.broker.name, broker_id=q.broker.id, id=q.id, perm=perm, endpoints=addrs)
    elif scenario == "unknown_method":
        import grpc

        with grpc.insecure_channel(endpoint) as channel:
            try:
                channel.unary_unary("/apache.rocketmq.v2.MessagingService/NoSuchMethod")(b"", timeout=5)
                out(code=None)
            except grpc.RpcError as exc:
                out(code=exc.code().name, details=exc.details())
    elif scenario == "extend_then_ack":
        # receive one, extend its invisible time, ack it with the handle the change gave
        consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=2)
        consumer.startup()
        try:
            messages: list = []
            deadline = time.monotonic() + 30
            while not messages and time.monotonic() < deadline:
                messages = consumer.receive(1, 2)
            msg = messages[0]
            before = msg.receipt_handle
            consumer.change_invisible_duration(msg, 30)
            out(body=msg.body.decode(), changed=msg.receipt_handle != before)
            consumer.ack(msg)
            out(acked=True)
        finally:
            consumer.shutdown()
    elif scenario in ("receive", "receive_no_ack", "receive_retrying"):
        # receive_retrying: as receive, but a failed receive (a broker gone in a failover) is
        # reported and asked again, as an application's receive loop does
        consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=2, tls_enable=tls)
        consumer.startup()
        try:
            got = 0
            deadline = time.monotonic() + wait
            while got < n and time.monotonic() < deadline:
                try:
                    batch = consumer.receive(16, 2 if scenario == "receive_no_ack" else 10)
                except BadRequestException as exc:
                    # ILLEGAL_POLLING_TIME: with await_duration 2 s the client's deadline (3 s +
                    # 2 s) leaves about the proxy's minimum polling time (5 s), and a call that
                    # reaches a loaded proxy late is refused, as Java's proxy refuses it: again
                    if "40018" not in str(exc):
                        raise
                    continue
                except Exception as exc:
                    if scenario != "receive_retrying":
                        raise
                    out(receive_failed=str(exc)[:200])
                    time.sleep(0.2)
                    continue
                for msg in batch:
                    got += 1
                    out(
                        body=msg.body.decode(),
                        id=msg.message_id,
                        tag=msg.tag,
                        keys=sorted(msg.keys),
                        props=dict(msg.properties),
                        group=msg.message_group,
                        attempt=msg.delivery_attempt,
                        corrupted=msg.corrupted,
                        due=msg.delivery_timestamp,
                        at=msg.decode_message_timestamp,
                    )
                    if scenario != "receive_no_ack":
                        consumer.ack(msg)
            out(received=got)
        finally:
            consumer.shutdown()
    elif scenario == "hold":
        # a SimpleConsumer that stays up until a line comes on stdin, then shuts down
        # (NotifyClientTermination, then its Telemetry stream ends)
        consumer = SimpleConsumer(config, group, {topic: FilterExpression("TagA||TagB")}, await_duration=2)
        consumer.startup()
        try:
            out(started=True)
            sys.stdin.readline()
        finally:
            consumer.shutdown()
        out(stopped=True)
    elif scenario == "send_fifo":
        # n FIFO messages in three message groups: message i is body "g<i % 3>-<i // 3>"
        producer = Producer(config, (topic,))
        producer.startup()
        try:
            for i in range(n):
                msg = Message()
                msg.topic = topic
                msg.body = f"g{i % 3}-{i // 3}".encode()
                msg.message_group = f"g{i % 3}"
                out(sent=producer.send(msg).message_id)
        finally:
            producer.shutdown()
    elif scenario == "receive_fifo":
        # n messages acked as they come, after the first batch received is left unacked until
        # its invisible time (2 s) is over
        consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=2)
        consumer.startup()
        try:
            acked, held = 0, True
            deadline = time.monotonic() + wait
            while acked < n and time.monotonic() < deadline:
                messages = consumer.receive(16, 2)
                for msg in messages:
                    out(body=msg.body.decode(), group=msg.message_group, attempt=msg.delivery_attempt, acked=not held)
                    if not held:
                        consumer.ack(msg)
                        acked += 1
                if held and messages:
                    held = False
                    time.sleep(2.5)
            out(received=acked)
        finally:
            consumer.shutdown()
    elif scenario == "fifo_poison":
        # one message at a time: "g0-0" is never acked (its invisible time is 1 s), the rest
        # are; the proxy forwards it to the DLQ once it was delivered as often as the group allows
        consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=2)
        consumer.startup()
        try:
            acked = 0
            deadline = time.monotonic() + wait
            while acked < n and time.monotonic() < deadline:
                for msg in consumer.receive(1, 1):
                    out(body=msg.body.decode(), attempt=msg.delivery_attempt)
                    if msg.body != b"g0-0":
                        consumer.ack(msg)
                        acked += 1
            out(received=acked)
        finally:
            consumer.shutdown()
    elif scenario == "push_fifo":
        # a PushConsumer (FIFO by its settings) whose listener fails "g1-1" every time: the
        # client retries it locally, then forwards it to the DLQ; n messages in all
        import threading

        from rocketmq import ConsumeResult, PushConsumer
        from rocketmq.v5.consumer.push.message_listener import MessageListener

        done = threading.Event()
        lock = threading.Lock()
        consumed: list[dict[str, object]] = []

        class Listener(MessageListener):
            def consume(self, message: Message) -> ConsumeResult:
                body = message.body.decode()
                with lock:
                    consumed.append({"body": body, "group": message.message_group})
                    if len({str(c["body"]) for c in consumed}) == n and body != "g1-1":
                        done.set()
                return ConsumeResult.FAILURE if body == "g1-1" else ConsumeResult.SUCCESS

        consumer = PushConsumer(config, group, Listener(), {topic: FilterExpression()})
        consumer.startup()
        try:
            out(fifo=consumer.fifo, all_consumed=done.wait(wait))
        finally:
            consumer.shutdown()
        for c in consumed:
            out(**c)
    elif scenario == "consumer_settings":
        # the settings a SimpleConsumer of the group gets on its Telemetry stream (the stub's)
        import grpc
        from rocketmq.grpc_protocol import MessagingServiceStub
        from rocketmq.grpc_protocol import definition_pb2 as d5
        from rocketmq.grpc_protocol import service_pb2 as s5

        settings = d5.Settings(client_type=d5.SIMPLE_CONSUMER)
        settings.subscription.group.name = group
        entry = settings.subscription.subscriptions.add()
        entry.topic.name = topic
        entry.expression.type = d5.TAG
        entry.expression.expression = "*"
        with grpc.insecure_channel(endpoint) as channel:
            answers = MessagingServiceStub(channel).Telemetry(
                iter([s5.TelemetryCommand(settings=settings)]), metadata=[("x-mq-client-id", "settings-probe")]
            )
            answer = next(answers)
            merged = answer.settings
            out(
                code=answer.status.code,
                fifo=merged.subscription.fifo,
                attempts=merged.backoff_policy.max_attempts,
            )
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    out(done=True)


if __name__ == "__main__":
    main()

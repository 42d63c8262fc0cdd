"""Child process that drives the official RocketMQ C++ client (PyPI ``rocketmq`` 0.4.4).

Run only by :mod:`cpp_client` as ``python cpp_child.py '<json spec>'``. It is a plain script,
not a module of the test package, so it runs the same wherever ``tests/`` sits on
``sys.path``; it needs only the standard library and ``rocketmq``.

Why a separate process: ``librocketmq.so`` starts native threads, can block in a send for
many seconds, and can crash the interpreter (the ``MQMessageExt`` getters such as
``GetMessageId`` read past a plain, not received, message: garbage or a segfault). The
parent kills this process at a hard deadline and reads ``-X faulthandler`` output from
its stderr.

Output protocol: one JSON object per line, written to a private duplicate of the original
stdout and flushed after every line. File descriptor 1 is redirected to stderr before
the native library loads, so nothing the library (or a stray ``print``) writes can corrupt
the JSON stream. Every object has an ``"event"`` key and ``"t"`` (seconds since start):

* ``started``  ``{"pid", "scenario"}``, after the client's ``start()`` returned
* ``send``     one per send (one per batch for ``batch``): ``{"method", "index", "count",
  "ok", "status", "msg_id", "offset", "queue_index", "queue_count", "error",
  "error_type", "elapsed"}``
* ``message``  one per delivery (push) or pulled message (pull), see ``Scenario.message_record``
* ``queues``   (pull) the queues ``FetchSubscriptionMessageQueues`` returned
* ``pull``     (pull) one per ``Pull`` call: status, offsets, message count
* ``error``    ``{"where", "error", "error_type"}``: something did not work
* ``stopped``  ``{"method", "index"}``: the parent asked the producer to stop (SIGUSR1, see
  ``ScenarioRun.stop_sending``); send ``index`` and later ones were never tried
* ``shutdown`` ``{"elapsed"}``, after the client's ``shutdown()`` returned
* ``done``     ``{"exit_code", ...}``, the last line

Exit codes: 0 the scenario completed (all sends OK / the wanted count was consumed),
1 it ran but did not complete (a send failed, the time limit passed, a callback error),
2 the spec was invalid or ``rocketmq`` could not be imported. The process leaves with
``os._exit`` after an explicit ``shutdown()``: the wrapper's ``__del__`` methods would
shut the client down a second time and destroy it during interpreter teardown.

The C++ client writes its log under ``$HOME/logs/rocketmq-cpp/`` (and broadcasting
offsets under ``$HOME/.rocketmq_offsets/``); ``getenv("HOME")`` is read when a client
is created, so the spec's ``home`` is put into ``os.environ`` before the import. The
parent points it at a per-run temporary directory.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import signal
import sys
import threading
import time
from typing import Any, ClassVar, NoReturn

_T0 = time.monotonic()
_STOP = threading.Event()  # set by SIGUSR1: a producer sends nothing more
_EMIT_LOCK = threading.Lock()
_OUT: Any = None

# Properties read from every received message in addition to the spec's property_keys.
# The C API has no way to enumerate a message's properties, so only named keys are seen.
DEFAULT_PROPERTY_KEYS = (
    "KEYS",
    "TAGS",
    "UNIQ_KEY",
    "WAIT",
    "DELAY",
    "RETRY_TOPIC",
    "REAL_TOPIC",
    "REAL_QID",
    "ORIGIN_MESSAGE_ID",
    "RECONSUME_TIME",
    "MAX_RECONSUME_TIMES",
    "CONSUME_START_TIME",
    "MIN_OFFSET",
    "MAX_OFFSET",
    "TRAN_MSG",
    "PGROUP",
    "CLUSTER",
    "MSG_REGION",
    "TRACE_ON",
)

_LOG_LEVELS = {"fatal": 1, "error": 2, "warn": 3, "info": 4, "debug": 5, "trace": 6}


def _open_event_channel() -> None:
    """Keep the real stdout for JSON lines; send fd 1 (and sys.stdout) to stderr."""
    global _OUT
    sys.stdout.flush()
    json_fd = os.dup(1)
    os.dup2(2, 1)
    _OUT = os.fdopen(json_fd, "w", encoding="utf-8", buffering=1)


def emit(event: str, **fields: Any) -> None:
    """Write one JSON line; safe to call from the client's native callback threads."""
    record = {"event": event, "t": round(time.monotonic() - _T0, 4), **fields}
    line = json.dumps(record, ensure_ascii=True, default=repr)
    with _EMIT_LOCK:
        _OUT.write(line + "\n")
        _OUT.flush()


def _finish(code: int, **fields: Any) -> NoReturn:
    emit("done", exit_code=code, **fields)
    _OUT.flush()
    sys.stderr.flush()
    os._exit(code)


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _error_fields(exc: BaseException) -> dict[str, str]:
    return {"error": str(exc), "error_type": type(exc).__name__}


class Scenario:
    """State shared by all scenarios: the spec, the deadline and the loaded library."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.deadline = _T0 + float(spec.get("time_limit", 30.0))
        from rocketmq import client, ffi  # imported here: must follow the HOME change

        self.client = client
        self.ffi = ffi
        self.dll = ffi.dll
        # Exported by librocketmq 1.2.3 but not declared by the 0.4.4 wrapper.
        self.dll.SetProducerCompressMsgBodyOverHowmuch.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.dll.SetProducerCompressMsgBodyOverHowmuch.restype = ctypes.c_int
        self.property_keys = tuple(dict.fromkeys([*DEFAULT_PROPERTY_KEYS, *spec.get("property_keys", ())]))

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def log_level(self) -> int | None:
        level = self.spec.get("log_level")
        return None if level is None else _LOG_LEVELS[level]

    def credentials(self) -> tuple[str, str, str] | None:
        creds = self.spec.get("credentials")
        if not creds:
            return None
        return creds["access_key"], creds["secret_key"], creds.get("channel", "LOCAL")

    def message_record(self, handle: int) -> dict[str, Any]:
        """Everything the C API exposes about a received message (MQMessageExt)."""
        dll = self.dll
        body = dll.GetMessageBody(handle) or b""
        properties = {}
        for key in self.property_keys:
            value = dll.GetMessageProperty(handle, key.encode())
            if value:
                properties[key] = _text(value)
        return {
            "topic": _text(dll.GetMessageTopic(handle)),
            "tags": _text(dll.GetMessageTags(handle)),
            "keys": _text(dll.GetMessageKeys(handle)),
            "body_b64": base64.b64encode(body).decode("ascii"),
            "msg_id": _text(dll.GetMessageId(handle)),
            "queue_id": dll.GetMessageQueueId(handle),
            "queue_offset": dll.GetMessageQueueOffset(handle),
            "commit_log_offset": dll.GetMessageCommitLogOffset(handle),
            "reconsume_times": dll.GetMessageReconsumeTimes(handle),
            "delay_time_level": dll.GetMessageDelayTimeLevel(handle),
            "store_size": dll.GetMessageStoreSize(handle),
            "born_timestamp": dll.GetMessageBornTimestamp(handle),
            "store_timestamp": dll.GetMessageStoreTimestamp(handle),
            "properties": properties,
        }


# ---------------------------------------------------------------------------------------------
# produce


class Produce(Scenario):
    def run(self) -> int:
        spec, client, dll = self.spec, self.client, self.dll
        producer = client.Producer(
            spec["group"],
            timeout=spec.get("send_timeout_ms"),
            compress_level=spec.get("compress_level"),
            max_message_size=spec.get("max_message_size"),
        )
        handle = producer._handle
        producer.set_namesrv_addr(spec["namesrv"])
        if (creds := self.credentials()) is not None:
            producer.set_session_credentials(*creds)
        if spec.get("instance_name"):
            client.ffi_check(dll.SetProducerInstanceName(handle, spec["instance_name"].encode()))
        if spec.get("compress_over") is not None:
            client.ffi_check(dll.SetProducerCompressMsgBodyOverHowmuch(handle, int(spec["compress_over"])))
        if (level := self.log_level()) is not None:
            client.ffi_check(dll.SetProducerLogLevel(handle, level))
        producer.start()
        emit("started", pid=os.getpid(), scenario="produce")

        method = spec["method"]
        messages = [self.build_message(m) for m in spec["messages"]]
        if method == "batch":
            all_ok = self.send_batches(producer, messages)
        elif method == "async":
            all_ok = self.send_async(producer, messages)
        else:
            all_ok = self.send_each(producer, messages, method)

        linger = spec.get("linger")
        if linger is None:
            linger = 0.5 if method in ("oneway", "oneway_orderly") else 0.0
        time.sleep(max(0.0, min(linger, self.remaining())))
        t = time.monotonic()
        producer.shutdown()
        emit("shutdown", elapsed=round(time.monotonic() - t, 4))
        return 0 if all_ok else 1

    def build_message(self, m: dict[str, Any]) -> Any:
        msg = self.client.Message(m.get("topic") or self.spec["topic"])
        if m.get("keys") is not None:
            msg.set_keys(m["keys"])
        if m.get("tags") is not None:
            msg.set_tags(m["tags"])
        body = base64.b64decode(m.get("body_b64", ""))
        # SetByteMessageBody keeps NUL bytes; the wrapper's set_body (a c_char_p) would cut them.
        self.client.ffi_check(self.dll.SetByteMessageBody(msg._handle, body, len(body)))
        for key, value in (m.get("properties") or {}).items():
            msg.set_property(key, value)
        if m.get("delay_level") is not None:
            msg.set_delay_time_level(int(m["delay_level"]))
        msg._rmq_sharding_key = int(
            m["sharding_key"] if m.get("sharding_key") is not None else self.spec.get("sharding_key", 0)
        )
        return msg

    def _stop_asked(self, index: int, method: str) -> bool:
        if not _STOP.is_set():
            return False
        emit("stopped", method=method, index=index)
        return True

    def _out_of_time(self, index: int, method: str) -> bool:
        if self.remaining() > 0:
            return False
        emit(
            "error", where=f"{method} send {index}", error="time limit reached before this send", error_type="TimeLimit"
        )
        return True

    def send_each(self, producer: Any, messages: list[Any], method: str) -> bool:
        ffi, dll, client = self.ffi, self.dll, self.client
        all_ok = True
        for index, msg in enumerate(messages):
            if self._stop_asked(index, method):
                break
            if self._out_of_time(index, method):
                return False
            selected: dict[str, int] = {}

            def select(mq_size: int, _msg: int, arg: int, selected: dict[str, int] = selected) -> int:
                # _msg is a plain MQMessage: GetMessageId & co. would read past it (the wrapper's
                # send_orderly hands it to Python selectors as a RecvMessage all the same).
                key = int(ctypes.cast(arg, ctypes.POINTER(ctypes.c_int))[0])
                selected["queue_count"] = mq_size
                selected["queue_index"] = key % mq_size
                return key % mq_size

            record: dict[str, Any] = {"method": method, "index": index, "count": 1}
            t = time.monotonic()
            try:
                if method == "sync":
                    res = producer.send_sync(msg)
                    record.update(ok=True, status=res.status.name, msg_id=res.msg_id, offset=res.offset)
                elif method == "oneway":
                    producer.send_oneway(msg)
                    record.update(ok=True, status=None, msg_id=None, offset=None)
                elif method in ("orderly", "oneway_orderly"):
                    callback = ffi.QUEUE_SELECTOR_CALLBACK(select)
                    key = ctypes.c_int(msg._rmq_sharding_key)
                    arg = ctypes.cast(ctypes.pointer(key), ctypes.c_void_p)
                    if method == "orderly":
                        cres = ffi._CSendResult()
                        client.ffi_check(
                            dll.SendMessageOrderly(
                                producer._handle,
                                msg,
                                callback,
                                arg,
                                int(self.spec.get("retry_times", 3)),
                                ctypes.pointer(cres),
                            )
                        )
                        record.update(
                            ok=True,
                            status=client.SendStatus(cres.sendStatus).name,
                            msg_id=cres.msgId.decode("utf-8", "replace"),
                            offset=cres.offset,
                        )
                    else:
                        client.ffi_check(dll.SendMessageOnewayOrderly(producer._handle, msg, callback, arg))
                        record.update(ok=True, status=None, msg_id=None, offset=None)
                    record.update(selected)
                else:
                    raise ValueError(f"unknown send method {method!r}")
            except Exception as exc:  # noqa: BLE001 - every failure becomes an event
                all_ok = False
                record.update(ok=False, **_error_fields(exc), **selected)
            record["elapsed"] = round(time.monotonic() - t, 4)
            emit("send", **record)
            if not record["ok"] and self.spec.get("stop_on_error"):
                return False
        return all_ok

    def send_batches(self, producer: Any, messages: list[Any]) -> bool:
        size = int(self.spec.get("batch_size") or len(messages) or 1)
        all_ok = True
        for index, start in enumerate(range(0, len(messages), size)):
            if self._stop_asked(index, "batch"):
                break
            if self._out_of_time(index, "batch"):
                return False
            chunk = messages[start : start + size]
            record: dict[str, Any] = {"method": "batch", "index": index, "count": len(chunk)}
            t = time.monotonic()
            try:
                res = producer.send_batch(chunk)
                record.update(ok=True, status=res.status.name, msg_id=res.msg_id, offset=res.offset)
            except Exception as exc:  # noqa: BLE001
                all_ok = False
                record.update(ok=False, **_error_fields(exc))
            record["elapsed"] = round(time.monotonic() - t, 4)
            emit("send", **record)
            if not record["ok"] and self.spec.get("stop_on_error"):
                return False
        return all_ok

    def send_async(self, producer: Any, messages: list[Any]) -> bool:
        lock = threading.Lock()
        completed = threading.Semaphore(0)
        outcome = {"ok": True}
        issued = 0
        for index, msg in enumerate(messages):
            if self._stop_asked(index, "async"):
                break
            if self._out_of_time(index, "async"):
                outcome["ok"] = False
                break
            t = time.monotonic()

            def on_success(res: Any, index: int = index, t: float = t) -> None:
                emit(
                    "send",
                    method="async",
                    index=index,
                    count=1,
                    ok=True,
                    status=res.status.name,
                    msg_id=res.msg_id,
                    offset=res.offset,
                    elapsed=round(time.monotonic() - t, 4),
                )
                completed.release()

            def on_exception(exc: Exception, index: int = index, t: float = t) -> None:
                with lock:
                    outcome["ok"] = False
                emit(
                    "send",
                    method="async",
                    index=index,
                    count=1,
                    ok=False,
                    status=None,
                    msg_id=None,
                    offset=None,
                    elapsed=round(time.monotonic() - t, 4),
                    **_error_fields(exc),
                )
                completed.release()

            try:
                producer.send_async(msg, on_success, on_exception)
                issued += 1
            except Exception as exc:  # noqa: BLE001
                outcome["ok"] = False
                emit(
                    "send",
                    method="async",
                    index=index,
                    count=1,
                    ok=False,
                    status=None,
                    msg_id=None,
                    offset=None,
                    elapsed=round(time.monotonic() - t, 4),
                    **_error_fields(exc),
                )
        for waited in range(issued):
            if not completed.acquire(timeout=max(0.0, self.remaining())):
                emit(
                    "error",
                    where="async send",
                    error_type="TimeLimit",
                    error=f"{issued - waited} async sends not completed within the time limit",
                )
                return False
        with lock:
            return outcome["ok"]


# ---------------------------------------------------------------------------------------------
# push consume


class PushConsume(Scenario):
    def run(self) -> int:
        spec, client, dll, ffi = self.spec, self.client, self.dll, self.ffi
        model = ffi.MessageModel.BROADCASTING if spec.get("broadcasting") else ffi.MessageModel.CLUSTERING
        orderly = bool(spec.get("orderly"))
        consumer = client.PushConsumer(spec["group"], orderly=orderly, message_model=model)
        handle = consumer._handle
        consumer.set_namesrv_addr(spec["namesrv"])
        if (creds := self.credentials()) is not None:
            consumer.set_session_credentials(*creds)
        if spec.get("instance_name"):
            consumer.set_instance_name(spec["instance_name"])
        if spec.get("thread_count"):
            consumer.set_thread_count(int(spec["thread_count"]))
        if spec.get("batch_max_size"):
            consumer.set_message_batch_max_size(int(spec["batch_max_size"]))
        if (level := self.log_level()) is not None:
            client.ffi_check(dll.SetPushConsumerLogLevel(handle, level))

        want = int(spec.get("count", 0))
        fail_first = int(spec.get("fail_first", 0))
        lock = threading.Lock()
        reached = threading.Event()
        state = {"deliveries": 0, "consumed": 0, "callback_errors": 0}

        def on_message(_consumer: int, msg: int) -> int:
            # A raw callback: its return value is the consume status. The wrapper's subscribe()
            # callback cannot fail a message (an exception still makes ctypes return 0).
            try:
                with lock:
                    delivery = state["deliveries"]
                    state["deliveries"] += 1
                status = 1 if delivery < fail_first else 0
                record = self.message_record(msg)
                if status == 0:
                    with lock:
                        state["consumed"] += 1
                        if want and state["consumed"] >= want:
                            reached.set()
                emit("message", delivery=delivery, result="RECONSUME_LATER" if status else "CONSUME_SUCCESS", **record)
                return status
            except BaseException as exc:  # noqa: BLE001 - must not unwind into C++
                with lock:
                    state["callback_errors"] += 1
                emit("error", where="consume callback", **_error_fields(exc))
                return 0

        callback = ffi.MSG_CALLBACK_FUNC(on_message)
        consumer._callback_refs.append(callback)
        client.ffi_check(dll.Subscribe(handle, spec["topic"].encode(), spec.get("expression", "*").encode()))
        register = dll.RegisterMessageCallbackOrderly if orderly else dll.RegisterMessageCallback
        client.ffi_check(register(handle, callback))
        consumer.start()
        emit("started", pid=os.getpid(), scenario="push_consume")

        got_all = reached.wait(timeout=max(0.0, self.remaining())) if want else False
        if not want:
            time.sleep(max(0.0, self.remaining()))
        if got_all and spec.get("linger"):
            time.sleep(max(0.0, min(float(spec["linger"]), self.remaining())))
        if want and not got_all:
            emit(
                "error",
                where="push consume",
                error_type="TimeLimit",
                error=f"consumed {state['consumed']} of {want} messages within the time limit",
            )
        with lock:
            ok_so_far = (got_all or not want) and state["callback_errors"] == 0
        emit("shutting_down", ok=ok_so_far)  # see ScenarioResult.aborted_in_shutdown
        t = time.monotonic()
        consumer.shutdown()
        emit("shutdown", elapsed=round(time.monotonic() - t, 4))
        with lock:
            summary = dict(state)
        emit("summary", **summary)
        ok = (got_all or not want) and summary["callback_errors"] == 0
        return 0 if ok else 1


# ---------------------------------------------------------------------------------------------
# pull consume


class PullConsume(Scenario):
    _STATUS: ClassVar[dict[int, str]] = {
        0: "FOUND",
        1: "NO_NEW_MSG",
        2: "NO_MATCHED_MSG",
        3: "OFFSET_ILLEGAL",
        4: "BROKER_TIMEOUT",
    }

    def run(self) -> int:
        spec, client, dll = self.spec, self.client, self.dll
        consumer = client.PullConsumer(spec["group"])
        handle = consumer._handle
        consumer.set_namesrv_addr(spec["namesrv"])
        if (creds := self.credentials()) is not None:
            consumer.set_session_credentials(*creds)
        if (level := self.log_level()) is not None:
            client.ffi_check(dll.SetPullConsumerLogLevel(handle, level))
        consumer.start()
        emit("started", pid=os.getpid(), scenario="pull_consume")

        ok = True
        try:
            ok = self.pull_all(handle)
        except Exception as exc:  # noqa: BLE001
            ok = False
            emit("error", where="pull", **_error_fields(exc))
        t = time.monotonic()
        consumer.shutdown()
        emit("shutdown", elapsed=round(time.monotonic() - t, 4))
        return 0 if ok else 1

    def pull_all(self, handle: int) -> bool:
        spec, client, dll, ffi = self.spec, self.client, self.dll, self.ffi
        topic = spec["topic"].encode()
        expression = spec.get("expression", "*").encode()
        max_num = int(spec.get("max_num", 32))
        want = spec.get("count")
        start_offsets = {int(k): int(v) for k, v in (spec.get("start_offsets") or {}).items()}

        mq_array = ctypes.POINTER(ffi._CMessageQueue)()
        size = ctypes.c_int()
        client.ffi_check(
            dll.FetchSubscriptionMessageQueues(handle, topic, ctypes.pointer(mq_array), ctypes.pointer(size))
        )
        try:
            queues = [mq_array[i] for i in range(size.value)]
            emit(
                "queues",
                queues=[
                    {"topic": _text(q.topic), "broker_name": _text(q.brokerName), "queue_id": q.queueId} for q in queues
                ],
            )
            if not queues:
                # FetchSubscriptionMessageQueues reports success with no queues when the name
                # server cannot be reached or does not know the topic.
                emit(
                    "error", where="pull", error_type="NoQueues", error=f"no message queues for topic {spec['topic']!r}"
                )
                return False
            offsets = {i: start_offsets.get(q.queueId, 0) for i, q in enumerate(queues)}
            total = 0
            while True:
                timed_out_queues = 0
                for i, mq in enumerate(queues):
                    while True:
                        if self.remaining() <= 0:
                            emit(
                                "error",
                                where="pull",
                                error_type="TimeLimit",
                                error=f"pulled {total} messages within the time limit",
                            )
                            return False
                        status, count, moved = self.pull_once(handle, mq, expression, offsets, i, max_num)
                        total += count
                        if want is not None and total >= int(want):
                            return True
                        if status == "BROKER_TIMEOUT":
                            timed_out_queues += 1
                            break
                        if status == "NO_NEW_MSG" or not moved:
                            break
                # One pass over every queue is done; with no count wanted, a pass without
                # BROKER_TIMEOUT means every queue was read to its end.
                if want is None and timed_out_queues == 0:
                    return True
                time.sleep(min(0.2, max(0.0, self.remaining())))
        finally:
            client.ffi_check(dll.ReleaseSubscriptionMessageQueue(mq_array))

    def pull_once(
        self, handle: int, mq: Any, expression: bytes, offsets: dict[int, int], index: int, max_num: int
    ) -> tuple[str, int, bool]:
        """One synchronous Pull; returns (status, messages found, whether the offset moved)."""
        dll = self.dll
        offset = offsets[index]
        t = time.monotonic()
        res = dll.Pull(handle, ctypes.pointer(mq), expression, ctypes.c_longlong(offset), max_num)
        try:
            status = self._STATUS.get(res.pullStatus, str(res.pullStatus))
            count = int(res.size) if status == "FOUND" else 0
            emit(
                "pull",
                queue_id=mq.queueId,
                broker_name=_text(mq.brokerName),
                offset=offset,
                status=status,
                next_begin_offset=res.nextBeginOffset,
                min_offset=res.minOffset,
                max_offset=res.maxOffset,
                count=count,
                elapsed=round(time.monotonic() - t, 4),
            )
            for j in range(count):
                emit("message", delivery=None, result="PULLED", **self.message_record(res.msgFoundList[j]))
            if status == "BROKER_TIMEOUT":
                return status, 0, False
            offsets[index] = res.nextBeginOffset
            return status, count, res.nextBeginOffset != offset
        finally:
            dll.ReleasePullResult(res)


_SCENARIOS: dict[str, type[Produce | PushConsume | PullConsume]] = {
    "produce": Produce,
    "push_consume": PushConsume,
    "pull_consume": PullConsume,
}


def main(argv: list[str]) -> None:
    _open_event_channel()
    signal.signal(signal.SIGUSR1, lambda signum, frame: _STOP.set())
    try:
        if len(argv) != 2:
            raise ValueError("usage: cpp_child.py '<json spec>'")
        arg = argv[1]
        if arg.startswith("@"):  # a spec too long for the command line is passed as a file
            with open(arg[1:], encoding="utf-8") as f:
                arg = f.read()
        spec = json.loads(arg)
        scenario_cls = _SCENARIOS[spec["scenario"]]
    except Exception as exc:  # noqa: BLE001
        emit("error", where="arguments", **_error_fields(exc))
        _finish(2)
    if spec.get("home"):
        os.makedirs(spec["home"], exist_ok=True)
        os.environ["HOME"] = spec["home"]
    try:
        scenario = scenario_cls(spec)
    except Exception as exc:  # noqa: BLE001 - e.g. ImportError, OSError from dlopen
        emit("error", where="import rocketmq", **_error_fields(exc))
        _finish(2)
    try:
        code = scenario.run()
    except Exception as exc:  # noqa: BLE001
        emit("error", where=spec["scenario"], **_error_fields(exc))
        code = 1
    _finish(code)


if __name__ == "__main__":
    main(sys.argv)

"""A scripted name server and broker for checking the C++ client harness itself.

This is test scaffolding, not rmq and not a model for it: it keeps messages in lists,
answers with the templates the C++ client accepted in ``shared/vectors/cpp-client`` and
imports nothing from ``rmq``. It lets ``test_cpp_harness.py`` prove that ``cpp_client``
sends, consumes, fails deliveries and parses results correctly, independently of the
state of our servers, so an interop failure can be pinned on the server, not the harness.

Behaviour, briefly: every topic exists with ``queue_nums`` queues (``%RETRY%`` topics
with 1) on one master ``broker-a``; a new group's consumer offset is 0; a pull with the
SUSPEND flag is held up to ``hold_seconds`` for a new message, then answered 19; a
CONSUMER_SEND_MSG_BACK copies the message into ``%RETRY%<group>`` at once (no delay);
broker-side tag filtering is not done (the C++ client filters itself).
"""

from __future__ import annotations

import contextlib
import json
import struct
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import trio

MAGIC_V1 = 0xDAA320A7
_RECORD_HEAD = struct.Struct(">iIiiiqqiq4siq4siiq")  # up to preparedTransactionOffset: 84 bytes
_LOOPBACK = bytes([127, 0, 0, 1])


def encode_properties(props: dict[str, str]) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in sorted(props.items()))


def decode_properties(raw: str) -> dict[str, str]:
    out = {}
    for item in raw.split("\x02"):
        if item:
            key, _, value = item.partition("\x01")
            out[key] = value
    return out


def encode_frame(header: dict[str, Any], body: bytes = b"") -> bytes:
    head = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    return struct.pack(">ii", 4 + len(head) + len(body), len(head)) + head + body


def decode_frame(payload: bytes) -> tuple[dict[str, Any], bytes]:
    """``payload`` is a frame without its length prefix."""
    head_len = int.from_bytes(payload[:4], "big") & 0xFFFFFF
    return json.loads(payload[4:4 + head_len]), payload[4 + head_len:]


def response(request: dict[str, Any], code: int = 0, ext: dict[str, Any] | None = None,
             body: bytes = b"", remark: str | None = None) -> bytes:
    header: dict[str, Any] = {"code": code, "flag": 1, "language": "JAVA", "opaque": request["opaque"],
                              "serializeTypeCurrentRPC": "JSON", "version": 399}
    if ext:
        header["extFields"] = {k: str(v) for k, v in ext.items()}  # the client skips numbers
    if remark is not None:
        header["remark"] = remark
    return encode_frame(header, body)


@dataclass
class StoredMessage:
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    body: bytes
    properties: str
    sys_flag: int = 0
    flag: int = 0
    born_timestamp: int = 0
    store_timestamp: int = 0
    reconsume_times: int = 0
    record: bytes = b""

    @property
    def props(self) -> dict[str, str]:
        return decode_properties(self.properties)


@dataclass
class Request:
    role: str
    code: int
    ext: dict[str, Any]
    body: bytes


@dataclass
class FakeCluster:
    queue_nums: int = 4
    hold_seconds: float = 1.0
    broker_name: str = "broker-a"
    requests: list[Request] = field(default_factory=list)
    queues: dict[tuple[str, int], list[StoredMessage]] = field(default_factory=lambda: defaultdict(list))
    by_commit_offset: dict[int, StoredMessage] = field(default_factory=dict)
    consumer_offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)
    clients: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    sendbacks: list[dict[str, Any]] = field(default_factory=list)
    namesrv_port: int = 0
    broker_port: int = 0
    _next_commit_offset: int = 0
    _arrival: trio.Event = field(default_factory=trio.Event)

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def requests_of(self, code: int, role: str = "broker") -> list[Request]:
        return [r for r in self.requests if r.code == code and r.role == role]

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        namesrv = await trio.open_tcp_listeners(0, host="127.0.0.1")
        broker = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.namesrv_port = namesrv[0].socket.getsockname()[1]
        self.broker_port = broker[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._connection("namesrv"), namesrv)
            await nursery.start(trio.serve_listeners, self._connection("broker"), broker)
            task_status.started(self)

    # -- storage --------------------------------------------------------------------------

    def put(self, topic: str, queue_id: int, body: bytes, props: dict[str, str] | str, *,
            sys_flag: int = 0, flag: int = 0, born_timestamp: int = 0, reconsume_times: int = 0) -> StoredMessage:
        queue = self.queues[(topic, queue_id)]
        msg = StoredMessage(
            topic=topic, queue_id=queue_id, queue_offset=len(queue), commit_log_offset=self._next_commit_offset,
            body=body, properties=props if isinstance(props, str) else encode_properties(props),
            sys_flag=sys_flag, flag=flag, born_timestamp=born_timestamp or _now_ms(),
            store_timestamp=_now_ms(), reconsume_times=reconsume_times,
        )
        msg.record = self._encode_record(msg)
        self._next_commit_offset += len(msg.record)
        queue.append(msg)
        self.by_commit_offset[msg.commit_log_offset] = msg
        self._arrival.set()
        self._arrival = trio.Event()
        return msg

    def _encode_record(self, m: StoredMessage) -> bytes:
        topic, props = m.topic.encode(), m.properties.encode()
        size = _RECORD_HEAD.size + 4 + len(m.body) + 1 + len(topic) + 2 + len(props)
        head = _RECORD_HEAD.pack(
            size, MAGIC_V1, zlib.crc32(m.body) & 0x7FFFFFFF, m.queue_id, m.flag, m.queue_offset,
            m.commit_log_offset, m.sys_flag, m.born_timestamp, _LOOPBACK, 40000, m.store_timestamp,
            _LOOPBACK, self.broker_port, m.reconsume_times, 0,
        )
        return (head + struct.pack(">i", len(m.body)) + m.body + struct.pack(">b", len(topic)) + topic
                + struct.pack(">h", len(props)) + props)

    def offset_msg_id(self, m: StoredMessage) -> str:
        return (_LOOPBACK + struct.pack(">iq", self.broker_port, m.commit_log_offset)).hex().upper()

    # -- connections ----------------------------------------------------------------------

    def _connection(self, role: str) -> Any:
        async def handle(stream: trio.SocketStream) -> None:
            send_lock = trio.Lock()
            buf = bytearray()
            async with trio.open_nursery() as nursery:
                try:
                    while data := await stream.receive_some(65536):
                        buf += data
                        while len(buf) >= 4 and len(buf) >= 4 + (n := int.from_bytes(buf[:4], "big")):
                            header, body = decode_frame(bytes(buf[4:4 + n]))
                            del buf[:4 + n]
                            if header.get("flag", 0) & 1:
                                continue  # a response from the client; none is expected
                            self.requests.append(Request(role, header["code"], header.get("extFields") or {}, body))
                            nursery.start_soon(self._answer, stream, send_lock, role, header, body)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass
                nursery.cancel_scope.cancel()  # abandon held pulls of a closed connection
        return handle

    async def _answer(self, stream: trio.SocketStream, lock: trio.Lock, role: str,
                      header: dict[str, Any], body: bytes) -> None:
        ext = {k: str(v) for k, v in (header.get("extFields") or {}).items()}
        if role == "namesrv":
            reply = self._namesrv(header, ext)
        else:
            reply = await self._broker(header, ext, body)
        async with lock:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.send_all(reply)

    def _namesrv(self, req: dict[str, Any], ext: dict[str, str]) -> bytes:
        if req["code"] != 105:
            return response(req, 3, remark="request type not supported")
        nums = 1 if ext["topic"].startswith("%RETRY%") else self.queue_nums
        route = {
            "brokerDatas": [{"brokerAddrs": {"0": self.broker_addr}, "brokerName": self.broker_name,
                             "cluster": "DefaultCluster"}],
            "filterServerTable": {},
            "queueDatas": [{"brokerName": self.broker_name, "perm": 6, "readQueueNums": nums,
                            "topicSynFlag": 0, "writeQueueNums": nums}],
        }
        return response(req, body=json.dumps(route, separators=(",", ":")).encode())

    async def _broker(self, req: dict[str, Any], ext: dict[str, str], body: bytes) -> bytes:
        code = req["code"]
        if code == 10:
            return self._send(req, ext, body)
        if code == 11:
            return await self._pull(req, ext)
        if code == 34:
            data = json.loads(body)
            for consumer in data.get("consumerDataSet", []):
                self.clients[consumer["groupName"]].add(data["clientID"])
            return response(req)
        if code == 35:
            self.clients[ext.get("consumerGroup", "")].discard(ext["clientID"])
            return response(req)
        if code == 38:
            ids = sorted(self.clients[ext["consumerGroup"]])
            return response(req, body=json.dumps({"consumerIdList": ids}).encode())
        if code == 14:
            key = (ext["consumerGroup"], ext["topic"], int(ext["queueId"]))
            return response(req, ext={"offset": self.consumer_offsets.get(key, 0)})
        if code == 15:
            key = (ext["consumerGroup"], ext["topic"], int(ext["queueId"]))
            self.consumer_offsets[key] = int(ext["commitOffset"])
            return response(req)
        if code == 29:
            return response(req, ext={"offset": 0})
        if code == 30:
            return response(req, ext={"offset": len(self.queues[(ext["topic"], int(ext["queueId"]))])})
        if code == 36:
            return self._send_back(req, ext)
        if code == 41:
            mq_set = json.loads(body)["mqSet"]
            return response(req, body=json.dumps({"lockOKMQSet": mq_set}).encode())
        if code == 42:
            return response(req)
        return response(req, 3, remark=f"request code {code} not supported")

    def _send(self, req: dict[str, Any], ext: dict[str, str], body: bytes) -> bytes:
        topic, queue_id = ext["topic"], int(ext["queueId"]) % self.queue_nums
        common = {"sys_flag": int(ext.get("sysFlag", "0")), "born_timestamp": int(ext.get("bornTimestamp", "0")),
                  "reconsume_times": int(ext.get("reconsumeTimes", "0"))}
        if ext.get("batch") in ("1", "true"):
            stored = [self.put(topic, queue_id, inner_body, props, flag=flag, **common)
                      for inner_body, props, flag in _decode_batch(body)]
        else:
            stored = [self.put(topic, queue_id, body, ext.get("properties", ""),
                               flag=int(ext.get("flag", "0")), **common)]
        return response(req, ext={
            "msgId": ",".join(self.offset_msg_id(m) for m in stored),
            "queueId": queue_id, "queueOffset": stored[0].queue_offset,
        })

    async def _pull(self, req: dict[str, Any], ext: dict[str, str]) -> bytes:
        key = (ext["topic"], int(ext["queueId"]))
        offset, max_nums = int(ext["queueOffset"]), int(ext.get("maxMsgNums", "32"))
        if int(ext.get("sysFlag", "0")) & 2:  # SUSPEND: long polling
            with trio.move_on_after(min(self.hold_seconds, int(ext.get("suspendTimeoutMillis", "0")) / 1000)):
                while offset >= len(self.queues[key]):
                    await self._arrival.wait()
        queue = self.queues[key]
        found = queue[offset:offset + max_nums]
        offsets = {"minOffset": 0, "maxOffset": len(queue), "suggestWhichBrokerId": 0}
        if not found:
            return response(req, 19, ext={"nextBeginOffset": min(offset, len(queue)), **offsets},
                            remark="No new message")
        return response(req, ext={"nextBeginOffset": offset + len(found), **offsets},
                        body=b"".join(m.record for m in found))

    def _send_back(self, req: dict[str, Any], ext: dict[str, str]) -> bytes:
        self.sendbacks.append(dict(ext))
        original = self.by_commit_offset.get(int(ext["offset"]))
        if original is None:
            return response(req, 1, remark=f"no message at commit log offset {ext['offset']}")
        props = original.props
        props.setdefault("RETRY_TOPIC", original.topic)
        props.setdefault("ORIGIN_MESSAGE_ID", self.offset_msg_id(original))
        self.put(f"%RETRY%{ext['group']}", 0, original.body, props, sys_flag=original.sys_flag,
                 flag=original.flag, born_timestamp=original.born_timestamp,
                 reconsume_times=original.reconsume_times + 1)
        return response(req)


def _decode_batch(body: bytes) -> list[tuple[bytes, str, int]]:
    """Java MessageDecoder.encodeMessages layout: size, magic, crc, flag, body, properties."""
    out, pos = [], 0
    while pos < len(body):
        _size, _magic, _crc, flag, body_len = struct.unpack_from(">iiiii", body, pos)
        pos += 20
        inner = body[pos:pos + body_len]
        pos += body_len
        (prop_len,) = struct.unpack_from(">h", body, pos)
        pos += 2
        out.append((inner, body[pos:pos + prop_len].decode(), flag))
        pos += prop_len
    return out


def _now_ms() -> int:
    return int(time.time() * 1000)

"""Reading REGISTER_BROKER bodies in the three forms brokers send (PROTOCOL.md 3.8).

- RegisterBrokerBody JSON: `{"filterServerList":[..],"topicConfigSerializeWrapper":
  {"dataVersion":{..},"topicConfigTable":{topic:TopicConfig}}}`
- the same, compressed (header `compressed=true`): a zlib stream of int32-length-prefixed
  parts: DataVersion JSON, a topic count, each topic as the text
  `name read write perm filterType`, and the filter server list JSON
- brokers older than V3_0_11 (version < 37) send the bare TopicConfigSerializeWrapper

Every failure raises RemoteProtocolError with a message fit for the SYSTEM_ERROR remark.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from rmq.protocol import body as json_body
from rmq.protocol.bodies.configs import DataVersion, TopicConfig
from rmq.protocol.errors import RemoteProtocolError

V3_0_11 = 37  # first version whose brokers send a RegisterBrokerBody

# A compressed body inflates to at most this much: RocketMQ's frame limit, so a small
# hostile body cannot expand into gigabytes.
MAX_INFLATED = 16 * 1024 * 1024

_I32 = struct.Struct(">i")


@dataclass(slots=True)
class RegisterBody:
    data_version: DataVersion = field(default_factory=DataVersion)
    topic_configs: dict[str, TopicConfig] = field(default_factory=dict)
    filter_servers: list[str] = field(default_factory=list)


def decode_register_body(data: bytes, *, compressed: bool, version: int) -> RegisterBody:
    """Parse a REGISTER_BROKER body; an empty body is an empty config at version (0, 0)."""
    if not data:
        return RegisterBody()
    try:
        if version < V3_0_11:
            version_, configs = _wrapper(json_body.loads(data))
            return RegisterBody(version_, configs)
        if compressed:
            return _decode_compressed(data)
        obj = json_body.loads(data)
        if not isinstance(obj, dict):
            raise ValueError("the body is not a JSON object")
        wrapper = obj.get("topicConfigSerializeWrapper")
        version_, configs = _wrapper({} if wrapper is None else wrapper)
        return RegisterBody(version_, configs, _filter_list(obj.get("filterServerList")))
    except RemoteProtocolError as exc:
        raise RemoteProtocolError(f"bad RegisterBrokerBody: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise RemoteProtocolError(f"bad RegisterBrokerBody: {exc}") from None


def _wrapper(obj: Any) -> tuple[DataVersion, dict[str, TopicConfig]]:
    if not isinstance(obj, dict):
        raise ValueError("topicConfigSerializeWrapper is not a JSON object")
    table = obj.get("topicConfigTable")
    if table is None:
        table = {}
    if not isinstance(table, dict):
        raise ValueError("topicConfigTable is not a JSON object")
    configs: dict[str, TopicConfig] = {}
    for key, value in table.items():
        config = TopicConfig.from_json(value, str(key))
        configs[config.topic_name] = config
    raw_version = obj.get("dataVersion")
    return (DataVersion() if raw_version is None else DataVersion.from_json(raw_version)), configs


def _filter_list(obj: Any) -> list[str]:
    if obj is None:
        return []
    if not isinstance(obj, list) or not all(isinstance(s, str) for s in obj):
        raise ValueError("filterServerList is not a list of strings")
    return obj


def _decode_compressed(data: bytes) -> RegisterBody:
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(data, MAX_INFLATED)
    except zlib.error as exc:
        raise ValueError(f"cannot inflate the compressed body: {exc}") from None
    if inflater.unconsumed_tail:
        raise ValueError(f"the compressed body inflates to more than {MAX_INFLATED} bytes")
    reader = _Reader(raw)
    data_version = DataVersion.from_json(json_body.loads(reader.chunk("dataVersion")))
    configs: dict[str, TopicConfig] = {}
    for _ in range(reader.count("topic count")):
        config = _topic_from_text(reader.chunk("topic config").decode("utf-8", "replace"))
        configs[config.topic_name] = config
    filters = _filter_list(json_body.loads(reader.chunk("filterServerList")))
    return RegisterBody(data_version, configs, filters)


def _topic_from_text(text: str) -> TopicConfig:
    # `name read write perm filterType`; 5.x appends attributes JSON as a sixth field
    parts = text.split(" ")
    if len(parts) < 5:
        raise ValueError(f"bad topic config text {text!r}")
    name, read, write, perm = parts[:4]
    try:
        return TopicConfig(name, int(read), int(write), int(perm))
    except ValueError:
        raise ValueError(f"bad topic config text {text!r}") from None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def count(self, what: str) -> int:
        if self.pos + 4 > len(self.data):
            raise ValueError(f"the compressed body ends before its {what}")
        value: int = _I32.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        if value < 0:
            raise ValueError(f"negative {what} {value} in the compressed body")
        return value

    def chunk(self, what: str) -> bytes:
        size = self.count(f"{what} length")
        if self.pos + size > len(self.data):
            raise ValueError(f"the compressed body ends inside its {what}")
        out = self.data[self.pos : self.pos + size]
        self.pos += size
        return out


def encode_compressed(body: RegisterBody) -> bytes:
    """The compressed form of `body`, as a 4.x broker with compressedRegister sends it."""
    parts = [_chunk(json_body.dumps(body.data_version.to_json())), _I32.pack(len(body.topic_configs))]
    for config in body.topic_configs.values():
        text = f"{config.topic_name} {config.read_queue_nums} {config.write_queue_nums} {config.perm} SINGLE_TAG"
        parts.append(_chunk(text.encode("utf-8")))
    parts.append(_chunk(json_body.dumps(body.filter_servers)))
    return zlib.compress(b"".join(parts), 9)


def encode_register_body(body: RegisterBody) -> bytes:
    """The uncompressed RegisterBrokerBody JSON of `body` (fastjson field order)."""
    table = {
        name: {
            "order": False,
            "perm": c.perm,
            "readQueueNums": c.read_queue_nums,
            "topicFilterType": "SINGLE_TAG",
            "topicName": c.topic_name,
            "topicSysFlag": c.topic_sys_flag,
            "writeQueueNums": c.write_queue_nums,
        }
        for name, c in body.topic_configs.items()
    }
    return json_body.dumps(
        {
            "filterServerList": body.filter_servers,
            "topicConfigSerializeWrapper": {"dataVersion": body.data_version.to_json(), "topicConfigTable": table},
        }
    )


def _chunk(data: bytes) -> bytes:
    return _I32.pack(len(data)) + data

"""REGISTER_BROKER's body, RegisterBrokerBody, in the three forms brokers send (PROTOCOL.md 3.8).

- JSON: `{"filterServerList":[..],"topicConfigSerializeWrapper":{"dataVersion":{..},
  "topicConfigTable":{topic:TopicConfig}}}`
- the same, compressed (header `compressed=true`): a zlib stream of int32-length-prefixed
  parts: DataVersion JSON, a topic count, each topic as the text
  `name read write perm filterType`, and the filter server list JSON
- brokers older than V3_0_11 (version < 37) send the bare TopicConfigSerializeWrapper

`decode_register_body` raises RemoteProtocolError with a message fit for the SYSTEM_ERROR
remark.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import body as json_body
from ..errors import RemoteProtocolError
from . import _fields as F
from .configs import DataVersion, TopicConfig, TopicConfigSerializeWrapper

V3_0_11 = 37  # first version whose brokers send a RegisterBrokerBody

# A compressed body inflates to at most this much: RocketMQ's frame limit, so a small
# hostile body cannot expand into gigabytes.
MAX_INFLATED = 16 * 1024 * 1024

_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    """A broker's topic table, with its version, and its filter servers. The table is keyed
    by topicName, as the name server reads it."""

    data_version: DataVersion = field(default_factory=DataVersion)
    topic_configs: dict[str, TopicConfig] = field(default_factory=dict)
    filter_servers: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        wrapper = TopicConfigSerializeWrapper(self.topic_configs, self.data_version)
        return register_body_json(wrapper.to_json(), self.filter_servers)

    @classmethod
    def from_json(cls, obj: Any) -> RegisterBrokerBody:
        obj = F.obj(obj, "the body")
        wrapper = obj.get("topicConfigSerializeWrapper")
        return _of_wrapper(
            {} if wrapper is None else wrapper, F.strings(obj.get("filterServerList"), "filterServerList")
        )


def register_body_json(
    wrapper: Mapping[str, Any], filter_servers: Sequence[str] = (), state_version: int | None = None
) -> dict[str, Any]:
    """The JSON of a RegisterBrokerBody around a TopicConfigSerializeWrapper's JSON, as a
    broker builds it from its table. `state_version` goes last into the dataVersion, where
    rmq brokers have always put it (RocketMQ 5 writes it between counter and timestamp;
    readers take either)."""
    if state_version is not None:
        wrapper = {**wrapper, "dataVersion": {**wrapper["dataVersion"], "stateVersion": state_version}}
    return {"filterServerList": list(filter_servers), "topicConfigSerializeWrapper": wrapper}


def _of_wrapper(obj: Any, filter_servers: list[str]) -> RegisterBrokerBody:
    wrapper = TopicConfigSerializeWrapper.from_json(F.obj(obj, "topicConfigSerializeWrapper"))
    configs = {config.topic_name: config for config in wrapper.topic_config_table.values()}
    return RegisterBrokerBody(wrapper.data_version, configs, filter_servers)


def decode_register_body(data: bytes, *, compressed: bool, version: int) -> RegisterBrokerBody:
    """Parse a REGISTER_BROKER body; an empty body is an empty config at version (0, 0)."""
    if not data:
        return RegisterBrokerBody()
    try:
        if version < V3_0_11:
            return _of_wrapper(json_body.loads(data), [])
        if compressed:
            return _decode_compressed(data)
        return RegisterBrokerBody.from_json(json_body.loads(data))
    except (RemoteProtocolError, ValueError, RecursionError) as exc:
        raise RemoteProtocolError(f"bad RegisterBrokerBody: {exc}") from None


def encode_register_body(body: RegisterBrokerBody) -> bytes:
    """The uncompressed form of `body` (fastjson field order)."""
    return json_body.dumps(body.to_json())


def encode_compressed(body: RegisterBrokerBody) -> bytes:
    """The compressed form of `body`, as a 4.x broker with compressedRegister sends it."""
    parts = [_chunk(json_body.dumps(body.data_version.to_json())), _I32.pack(len(body.topic_configs))]
    for config in body.topic_configs.values():
        text = f"{config.topic_name} {config.read_queue_nums} {config.write_queue_nums} {config.perm} SINGLE_TAG"
        parts.append(_chunk(text.encode("utf-8")))
    parts.append(_chunk(json_body.dumps(body.filter_servers)))
    return zlib.compress(b"".join(parts), 9)


def _decode_compressed(data: bytes) -> RegisterBrokerBody:
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
    filters = F.strings(json_body.loads(reader.chunk("filterServerList")), "filterServerList")
    return RegisterBrokerBody(data_version, configs, filters)


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


def _chunk(data: bytes) -> bytes:
    return _I32.pack(len(data)) + data

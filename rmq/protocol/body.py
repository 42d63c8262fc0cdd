"""JSON bodies in the dialect RocketMQ peers speak (PROTOCOL.md 4.1, 4.3).

fastjson writes maps with non-string keys with the key unquoted: `{0:"127.0.0.1:10911"}`
for integer keys, `{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}` for MessageQueue
keys. Python's json can neither read nor write that, so:

- `dumps(obj, legacy=...)` writes compact JSON (no whitespace at all: the Go client
  splits route text by hand). Integer keys are written unquoted when `legacy` is true
  and quoted otherwise; `MessageQueue` keys are always written as objects. A value with a
  `to_json()` method is written as what that returns.
- `loads(data)` reads standard JSON fast and falls back to a lenient parser that
  accepts unquoted numeric keys and object keys (returned as MessageQueue).

The value classes of the bodies (rmq.protocol.bodies) read and write through these two.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

from .errors import BodyError, RemoteProtocolError

_encode_str = json.JSONEncoder(ensure_ascii=False).encode
_decode = json.JSONDecoder().decode


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker (MessageQueue.java); ordered as RocketMQ sorts
    queues. Bodies carry it as an object, and as a map key (fastjson's object keys)."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, obj: Any) -> MessageQueue:
        """From its JSON object (or a MessageQueue, as a lenient parse gives keys); BodyError
        if it is neither."""
        if isinstance(obj, MessageQueue):
            return obj
        try:
            return cls(str(obj["topic"]), str(obj["brokerName"]), int(obj["queueId"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise BodyError(f"bad MessageQueue object {obj!r:.200}: {exc}") from None


MQKey = MessageQueue  # the name older code gives a MessageQueue used as a map key


def dumps(obj: Any, *, legacy: bool = False) -> bytes:
    """Compact JSON bytes; see the module docstring for the key rules."""
    out: list[str] = []
    _write(obj, out, legacy)
    return "".join(out).encode("utf-8")


def dumps_members(members: Iterable[tuple[Any, Any]], *, legacy: bool = False) -> Iterator[bytes]:
    """The bytes `dumps(dict(members))` writes, a member at a time (a big table is
    encoded in turns)."""
    yield b"{"
    sep = b""
    for key, value in members:
        yield sep + dumps({key: value}, legacy=legacy)[1:-1]
        sep = b","
    yield b"}"


def _write(obj: Any, out: list[str], legacy: bool) -> None:
    if isinstance(obj, dict):
        out.append("{")
        first = True
        for key, value in obj.items():
            if not first:
                out.append(",")
            first = False
            if isinstance(key, MessageQueue):
                _write(key.to_json(), out, legacy)
            elif isinstance(key, bool) or not isinstance(key, int):
                out.append(_encode_str(str(key)))
            elif legacy:
                out.append(str(key))
            else:
                out.append(f'"{key}"')
            out.append(":")
            _write(value, out, legacy)
        out.append("}")
    elif isinstance(obj, (list, tuple, set, frozenset)):
        out.append("[")
        for i, value in enumerate(obj):
            if i:
                out.append(",")
            _write(value, out, legacy)
        out.append("]")
    elif isinstance(obj, str):
        out.append(_encode_str(obj))
    elif obj is None or isinstance(obj, (bool, int, float)):
        out.append(json.dumps(obj))
    elif dataclass_to_json := getattr(obj, "to_json", None):
        _write(dataclass_to_json(), out, legacy)
    else:
        raise TypeError(f"cannot write {type(obj).__name__} as a JSON body")


def loads(data: bytes | str) -> Any:
    """Parse a body in either dialect; RemoteProtocolError if it is neither."""
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(f"body is not UTF-8: {exc}") from None
    try:
        value = _decode(text)
    except RecursionError:
        raise RemoteProtocolError("bad JSON body: nested too deeply") from None
    except ValueError:
        parser = _Lenient(text)
        value = parser.value()
        parser.ws()
        if parser.pos != len(text):
            parser.fail("trailing characters")
    if has_surrogate_escape(text):
        value = scrub_surrogates(value)
    return value


# One scan for either case: a send's header is full of \u0001 and \u0002 (its properties'
# separators), and two substring searches over it cost twice this.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD]")


def has_surrogate_escape(text: str) -> bool:
    """Whether JSON ``text`` may decode to a lone surrogate (only a ``\\uD800``-style escape can)."""
    return _SURROGATE_ESCAPE.search(text) is not None


def scrub_surrogates(value: Any) -> Any:
    """``value`` with each lone UTF-16 surrogate in its strings replaced by ``?``, as Java writes
    such a string out. Kept, one would make every later answer carrying that string (a topic,
    group or KV entry a peer made up) fail to encode as UTF-8."""
    try:
        return _scrub(value)
    except RecursionError:
        raise RemoteProtocolError("bad JSON: nested too deeply") from None


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "replace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, MessageQueue):
        return MessageQueue(_scrub(value.topic), _scrub(value.broker_name), value.queue_id)
    return value


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_WS = re.compile(r"[ \t\n\r]*")
_scan_string = json.decoder.scanstring  # type: ignore[attr-defined]

# Nesting limit for the lenient parser: bodies we accept are shallow, and recursion
# on hostile input must end in an error, not a crash.
_MAX_DEPTH = 64


class _Lenient:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def fail(self, what: str) -> NoReturn:
        raise RemoteProtocolError(f"bad JSON body at offset {self.pos}: {what}")

    def ws(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def value(self) -> Any:
        self.ws()
        text, pos = self.text, self.pos
        if pos >= len(text):
            self.fail("unexpected end")
        ch = text[pos]
        if ch == "{":
            return self.obj()
        if ch == "[":
            return self.arr()
        if ch == '"':
            try:
                s, self.pos = _scan_string(text, pos + 1)
            except ValueError as exc:
                self.fail(str(exc))
            return s
        for word, val in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, pos):
                self.pos = pos + len(word)
                return val
        m = _NUMBER.match(text, pos)
        if not m:
            self.fail(f"unexpected character {ch!r}")
        self.pos = m.end()
        num = m.group()
        if any(c in num for c in ".eE"):
            return float(num)
        try:
            return int(num)
        except ValueError as exc:  # more digits than Python converts (sys.int_info)
            self.fail(str(exc))

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            self.fail("nested too deeply")

    def obj(self) -> dict[Any, Any]:
        self._enter()
        self.pos += 1
        out: dict[Any, Any] = {}
        self.ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            self.depth -= 1
            return out
        while True:
            key = self.value()
            if isinstance(key, dict):
                key = MessageQueue.from_json(key)
            elif isinstance(key, (list, float)) or key is None or isinstance(key, bool):
                self.fail("bad object key")
            self.ws()
            if not self.text.startswith(":", self.pos):
                self.fail("expected ':'")
            self.pos += 1
            out[key] = self.value()
            self.ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("}", self.pos):
                self.pos += 1
                self.depth -= 1
                return out
            self.fail("expected ',' or '}'")

    def arr(self) -> list[Any]:
        self._enter()
        self.pos += 1
        out: list[Any] = []
        self.ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            self.depth -= 1
            return out
        while True:
            out.append(self.value())
            self.ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("]", self.pos):
                self.pos += 1
                self.depth -= 1
                return out
            self.fail("expected ',' or ']'")

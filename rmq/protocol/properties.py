"""Message properties: the ``name\\x01value\\x02name\\x01value`` string and its well-known keys.

The codec mirrors RocketMQ 4.x ``MessageDecoder`` (PROTOCOL.md 5.3, 5.4):

* ``encode_properties`` writes no trailing ``\\x02`` (Java 4.9.1+); every 4.x reader accepts that.
* ``decode_properties`` accepts a trailing ``\\x02`` (older Java, cpp, go) and, like Java, skips
  segments shorter than three characters and pairs with an empty name or an empty value. The
  name ends at the first ``\\x01``; later ``\\x01`` characters belong to the value.

stdlib only; nothing here touches I/O.
"""

from __future__ import annotations

import array
import operator
import sys
from collections.abc import Iterable, Mapping

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "  # between the business keys inside KEYS

# Well-known keys (MessageConst.java). The constant name is the key text unless noted.
KEYS = "KEYS"
TAGS = "TAGS"
WAIT = "WAIT"  # "false" = do not wait for flush or replication; absent means true
DELAY = "DELAY"  # delay level 1..18
RETRY_TOPIC = "RETRY_TOPIC"
REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
TRAN_MSG = "TRAN_MSG"
PGROUP = "PGROUP"
MIN_OFFSET = "MIN_OFFSET"
MAX_OFFSET = "MAX_OFFSET"
BUYER_ID = "BUYER_ID"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
TRANSFER_FLAG = "TRANSFER_FLAG"
CORRECTION_FLAG = "CORRECTION_FLAG"
MQ2_FLAG = "MQ2_FLAG"
RECONSUME_TIME = "RECONSUME_TIME"
MSG_REGION = "MSG_REGION"
TRACE_ON = "TRACE_ON"
UNIQ_KEY = "UNIQ_KEY"  # client message id (PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
CONSUME_START_TIME = "CONSUME_START_TIME"
TRAN_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
INSTANCE_ID = "INSTANCE_ID"
CORRELATION_ID = "CORRELATION_ID"
REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
TTL = "TTL"
ARRIVE_TIME = "ARRIVE_TIME"
PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
CLUSTER = "CLUSTER"
MSG_TYPE = "MSG_TYPE"
INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
SHARDING_KEY = "__SHARDINGKEY"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
START_DELIVER_TIME = "__STARTDELIVERTIME"  # Aliyun ONS delay marker; 4.x brokers ignore it
# Properties that ask a timer-wheel broker for a delivery time, in the order it honours them.
TIMER_KEYS = (TIMER_DELIVER_MS, START_DELIVER_TIME, TIMER_DELAY_SEC, TIMER_DELAY_MS)
TRANSACTION_ID = "__transactionId__"

# Java String.hashCode works on UTF-16 code units with int32 wraparound. Powers of 31 modulo
# 2**32 turn the loop into one C-level sum for strings up to this many code units.
_POW_LIMIT = 4096
_POWERS = [pow(31, i, 1 << 32) for i in range(_POW_LIMIT + 1)]
_POWERS_REVERSED = _POWERS[_POW_LIMIT - 1 :: -1]
_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"
# Many strings of one length are hashed a character at a time over all of them at once
# (`_ascii_hashes_by_column`): worth it from this many strings, up to this length.
_COLUMNS_MIN = 12
_COLUMNS_MAX_LEN = 64
_SLOT_MASK = (0xFFFFFFFF).to_bytes(8, "little")


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()`` of ``s`` as a signed int32.

    Characters outside the BMP count as two UTF-16 surrogate units, as in Java.
    """
    return java_string_hash_extend(0, s)


def java_string_hash_extend(prefix_hash: int, s: str) -> int:
    """Java hash of ``p + s`` given ``prefix_hash`` = Java hash of ``p`` (signed int32).

    Lets callers hash many strings sharing a prefix (``topic#key``) without rehashing it.
    """
    return java_string_hashes(((prefix_hash, s),))[0]


def java_string_hashes(pairs: Iterable[tuple[int, str]]) -> list[int]:
    """``java_string_hash_extend`` of each (prefix hash, string) pair, in one call: the index
    hashes all the keys of a dispatch pass at once."""
    pairs = pairs if isinstance(pairs, (list, tuple)) else list(pairs)
    if len(pairs) >= _COLUMNS_MIN:
        strings = [s for _, s in pairs]
        n = len(strings[0])
        if 0 < n <= _COLUMNS_MAX_LEN and len(set(map(len, strings))) == 1 and (joined := "".join(strings)).isascii():
            return _ascii_hashes_by_column([h for h, _ in pairs], joined.encode("ascii"), n)
    out: list[int] = []
    powers, powers_reversed, limit, mul = _POWERS, _POWERS_REVERSED, _POW_LIMIT, operator.mul
    for prefix_hash, s in pairs:
        if s.isascii():
            units: bytes | array.array[int] = s.encode("ascii")
        else:
            units = array.array("H", s.encode(_UTF16_NATIVE, "surrogatepass"))  # Java hashes lone surrogates too
        n = len(units)
        if n <= limit:
            h = (prefix_hash * powers[n] + sum(map(mul, units, powers_reversed[limit - n :]))) & 0xFFFFFFFF
        else:
            h = prefix_hash & 0xFFFFFFFF
            for c in units:
                h = (31 * h + c) & 0xFFFFFFFF
        out.append(h - 0x100000000 if h & 0x80000000 else h)
    return out


def _ascii_hashes_by_column(prefix_hashes: list[int], data: bytes, n: int) -> list[int]:
    """Java hashes of the ASCII strings of `n` characters each, joined in `data`, extending
    `prefix_hashes`. All strings advance together, one character a step: one integer holds
    a 64-bit slot per string (h * 31 + c stays below 2**37), and three big-integer operations
    replace a step of every string's loop. About half the cost of one sum per string for a
    batch of 32-character UNIQ_KEYs."""
    m = len(prefix_hashes)
    mask = int.from_bytes(_SLOT_MASK * m, "little")
    column = bytearray(8 * m)
    h = 0
    for t in range(n):
        column[::8] = data[t::n]  # the t-th character of every string, one per slot
        h = (h * 31 + int.from_bytes(column, "little")) & mask
    scale = _POWERS[n]
    out: list[int] = []
    tails = array.array("Q", h.to_bytes(8 * m, "little"))
    if sys.byteorder == "big":
        tails.byteswap()
    for prefix_hash, tail in zip(prefix_hashes, tails, strict=True):
        v = (prefix_hash * scale + tail) & 0xFFFFFFFF
        out.append(v - 0x100000000 if v & 0x80000000 else v)
    return out


def decode_properties(text: str | bytes | bytearray | memoryview) -> dict[str, str]:
    """Parse a properties string into a dict, with Java's leniency (see module docstring).

    Bytes are decoded as UTF-8; invalid UTF-8 is replaced rather than rejected, as Java does.
    A later duplicate name overwrites an earlier one.
    """
    if not isinstance(text, str):
        text = bytes(text).decode("utf-8", "replace")
    result: dict[str, str] = {}
    for segment in text.split(PROPERTY_SEPARATOR):
        name, _, value = segment.partition(NAME_VALUE_SEPARATOR)
        if name and value:
            result[name] = value
    return result


def encode_properties(props: Mapping[str, str | None] | None) -> str:
    """Render ``props`` as ``k\\x01v\\x02k\\x01v`` with no trailing separator; ``None`` values are skipped."""
    if not props:
        return ""
    try:  # all values are strings: one C-level join
        return PROPERTY_SEPARATOR.join(map(NAME_VALUE_SEPARATOR.join, props.items()))  # type: ignore[arg-type]
    except TypeError:
        return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items() if v is not None)


def property_marks(names: Iterable[str]) -> tuple[bytes, ...]:
    """What ``may_have`` looks for, made once for many calls: each name between the separators
    that can surround it."""
    return tuple(PROPERTY_SEPARATOR.encode() + n.encode("utf-8") + NAME_VALUE_SEPARATOR.encode() for n in names)


def may_have(encoded: bytes, marks: tuple[bytes, ...]) -> bool:
    """Whether encoded properties may hold any name of ``marks`` (``property_marks``): False
    means surely not (no name followed by its separator, at the start or after a property
    separator); True asks the caller to decode them to be sure."""
    padded = b"\x02" + encoded
    for mark in marks:
        if mark in padded:
            return True
    return False


def may_any_have(encoded: Iterable[bytes], marks: tuple[bytes, ...]) -> bool:
    """``may_have`` over many encoded properties at once (a batch's items): False means none
    of them holds a name of ``marks``. One scan per mark over the items joined by the
    property separator, which begins each item as the padding does in ``may_have``."""
    return may_have(b"\x02".join(encoded), marks)


def split_keys(keys: str | None) -> list[str]:
    """The non-empty business keys of a KEYS value (space separated)."""
    if not keys:
        return []
    return [k for k in keys.split(KEY_SEPARATOR) if k]

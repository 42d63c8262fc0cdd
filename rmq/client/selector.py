"""Queue selectors for ordered sends (RocketMQ's MessageQueueSelector).

A selector is any callable `(queues, message, arg) -> MessageQueue`. Messages that must
stay in order share a sharding key, so they land in one queue and are consumed in send
order by an orderly consumer. `select_by_hash` is SelectMessageQueueByHash: the key's
Java hashCode modulo the queue count (so a Java producer with the same key picks the
same queue index).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from rmq.protocol.message import Message
from rmq.protocol.properties import java_string_hash

from .message import MessageQueue

QueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def java_hash(value: Any) -> int:
    """Java's hashCode for the keys people shard by: String, Integer/Long, Boolean."""
    if isinstance(value, str):
        return java_string_hash(value)
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return value  # Integer.hashCode
        v = value & 0xFFFFFFFFFFFFFFFF  # Long.hashCode: (int)(v ^ (v >>> 32))
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return h - 2**32 if h & 0x80000000 else h
    return hash(value)


def select_by_hash(queues: Sequence[MessageQueue], message: Message, arg: Any) -> MessageQueue:
    """SelectMessageQueueByHash: |hashCode(arg) rem n| (Java's truncating remainder)."""
    return queues[abs(java_hash(arg)) % len(queues)]


def select_by_random(queues: Sequence[MessageQueue], message: Message, arg: Any) -> MessageQueue:
    """SelectMessageQueueByRandom."""
    return queues[random.randrange(len(queues))]

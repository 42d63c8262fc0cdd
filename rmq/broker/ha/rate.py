"""Bytes per second over the last whole second, for HA status (transferredByteInSecond)."""

from __future__ import annotations

import time


class ByteRate:
    __slots__ = ("_count", "_second", "_last")

    def __init__(self) -> None:
        self._second = int(time.monotonic())
        self._count = 0  # bytes in the current second
        self._last = 0  # bytes in the previous second

    def _roll(self) -> None:
        now = int(time.monotonic())
        if now != self._second:
            self._last = self._count if now == self._second + 1 else 0
            self._count = 0
            self._second = now

    def add(self, n: int) -> None:
        self._roll()
        self._count += n

    def per_second(self) -> int:
        self._roll()
        return self._last

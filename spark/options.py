"""Reader options shared by both sources: topics, time bounds, and Spark filter pushdown.

Times (`since`, `until`, `--since`, `--until`) are epoch milliseconds (all digits) or ISO
8601 text (`2024-05-01`, `2024-05-01T12:30:00`, `...+02:00`, `...Z`); text without a zone
means UTC. `since` is inclusive, `until` exclusive, both on `store_timestamp`.

With pushdown, `topic = 'x'`, `topic IN (...)` and comparisons of `store_timestamp` with
a literal narrow the scan the same way `topics` / `since` / `until` do; the reader then
applies them exactly, so Spark need not evaluate them again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

_UTC = dt.UTC


def parse_time(text: str) -> int:
    """Epoch milliseconds from digits or ISO 8601 text (naive means UTC); ValueError otherwise."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"bad time {text!r}: want epoch milliseconds or ISO 8601 like 2024-05-01T12:00:00Z") from None
    return datetime_ms(value)


def datetime_ms(value: dt.datetime) -> int:
    """Milliseconds of a datetime, rounded down (naive means UTC)."""
    return _micros(value) // 1000


def _micros(value: dt.datetime) -> int:
    """Exact microseconds since the epoch (naive means UTC); no float rounding."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=_UTC)
    delta = value - dt.datetime(1970, 1, 1, tzinfo=_UTC)
    return delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds


def split_list(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


@dataclass(frozen=True, slots=True)
class Bounds:
    """Which records a read wants: topics (None = all) and [since_ms, until_ms) on store time."""

    topics: frozenset[str] | None = None
    since_ms: int | None = None
    until_ms: int | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Bounds:
        topics = split_list(options.get("topics")) + split_list(options.get("topic"))
        since = options.get("since")
        until = options.get("until")
        return cls(
            frozenset(topics) if topics else None,
            parse_time(since) if since else None,
            parse_time(until) if until else None,
        )

    def with_topics(self, topics: Iterable[str]) -> Bounds:
        new = frozenset(topics)
        return replace(self, topics=new if self.topics is None else self.topics & new)

    def with_since(self, ms: int) -> Bounds:
        return replace(self, since_ms=ms if self.since_ms is None else max(self.since_ms, ms))

    def with_until(self, ms: int) -> Bounds:
        return replace(self, until_ms=ms if self.until_ms is None else min(self.until_ms, ms))

    def accepts(self, topic: str, store_ms: int) -> bool:
        return (
            (self.topics is None or topic in self.topics)
            and (self.since_ms is None or store_ms >= self.since_ms)
            and (self.until_ms is None or store_ms < self.until_ms)
        )


def push_filters(bounds: Bounds, filters: Iterable[Any]) -> tuple[Bounds, list[Any]]:
    """Fold the filters we can apply exactly into `bounds`; return them and the rest.

    `filters` are pyspark.sql.datasource Filter objects (Spark 4.1+); matched by class
    name so this module needs no pyspark import.
    """
    rest = []
    for f in filters:
        kind = type(f).__name__
        column = getattr(f, "attribute", None)
        value = getattr(f, "value", None)
        if column == ("topic",) and kind == "EqualTo" and isinstance(value, str):
            bounds = bounds.with_topics([value])
        elif (
            column == ("topic",)
            and kind == "In"
            and isinstance(value, tuple)
            and all(isinstance(v, str) for v in value)
        ):
            bounds = bounds.with_topics(value)
        elif column == ("store_timestamp",) and isinstance(value, dt.datetime) and kind in _TIME_FILTERS:
            bounds = _TIME_FILTERS[kind](bounds, _micros(value))
        else:
            rest.append(f)
    return bounds, rest


# Store times are whole milliseconds, so a microsecond bound t turns into an exact
# millisecond bound: ts > t ⇔ ts_ms ≥ t//1000 + 1, ts ≥ t ⇔ ts_ms ≥ ceil(t/1000), and so on.
_TIME_FILTERS = {
    "GreaterThan": lambda b, us: b.with_since(us // 1000 + 1),
    "GreaterThanOrEqual": lambda b, us: b.with_since(-(-us // 1000)),
    "LessThan": lambda b, us: b.with_until(-(-us // 1000)),
    "LessThanOrEqual": lambda b, us: b.with_until(us // 1000 + 1),
}


def normalize(options: Mapping[str, str]) -> dict[str, str]:
    """Option names lower-cased, as Spark treats them (its CaseInsensitiveDict does the same)."""
    return {k.lower(): v for k, v in options.items()}


def option_int(options: Mapping[str, str], name: str, default: int) -> int:
    raw = options.get(name.lower())
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"option {name} must be an integer, got {raw!r}") from None


def option_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    return raw.strip().lower() in ("true", "1", "yes")

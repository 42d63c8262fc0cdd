"""The findings part of a fuzz run's summary, shared by `rmq fuzz` and `rmq fuzz --grpc`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar


class Case(Protocol):
    def describe(self) -> str: ...


CaseT = TypeVar("CaseT", bound=Case)


@dataclass
class Finding(Generic[CaseT]):
    kind: str  # CRASH, HANG, BAD_ANSWER or INTERNAL_ERROR
    case: CaseT
    detail: str


@dataclass
class CategoryStats:
    sent: int = 0
    answered: int = 0  # every case owed an answer got one
    closed: int = 0  # the server closed the connection after the case


def category_lines(categories: Mapping[str, CategoryStats], names: Sequence[str], width: int) -> list[str]:
    """The per-category table (sent, answered, closed), in ``names`` order, skipping unsent ones."""
    lines = [f"  {'category':<{width}}{'sent':>8}{'answered':>10}{'closed':>8}"]
    for name in names:
        st = categories.get(name)
        if st and st.sent:
            lines.append(f"  {name:<{width}}{st.sent:>8}{st.answered:>10}{st.closed:>8}")
    return lines


def finding_lines(
    failures: Sequence[Finding[CaseT]],
    internal_errors: Sequence[Finding[CaseT]],
    strict: bool,
    replay: Callable[[CaseT], str],
) -> list[str]:
    """Each failure with its replay command; internal errors apart unless ``strict`` counts them."""
    lines = [f"findings: {len(failures) or 'none'}"]
    for f in failures:
        lines.append(f"  {f.kind:<14} {f.case.describe()}")
        lines.append(f"  {'':<14} {f.detail}")
        lines.append(f"  {'':<14} replay: {replay(f.case)}")
    if internal_errors and not strict:
        lines.append(f"internal errors (answered; --strict counts them): {len(internal_errors)}")
        for f in internal_errors[:10]:
            lines.append(f"  {f.case.describe()}: {f.detail}")
            lines.append(f"    replay: {replay(f.case)}")
    return lines

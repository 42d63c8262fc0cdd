"""The findings part of a fuzz run's summary, shared by `rmq fuzz` and `rmq fuzz --grpc`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol


class FindingLike(Protocol):
    kind: str
    case: Any  # a case with describe()
    detail: str


class Tally(Protocol):
    sent: int
    answered: int
    closed: int


def category_lines(categories: Mapping[str, Tally], names: Sequence[str], width: int) -> list[str]:
    """The per-category table (sent, answered, closed), in ``names`` order, skipping unsent ones."""
    lines = [f"  {'category':<{width}}{'sent':>8}{'answered':>10}{'closed':>8}"]
    for name in names:
        st = categories.get(name)
        if st and st.sent:
            lines.append(f"  {name:<{width}}{st.sent:>8}{st.answered:>10}{st.closed:>8}")
    return lines


def finding_lines(
    failures: Sequence[FindingLike], internal_errors: Sequence[FindingLike], strict: bool, replay: Callable[[Any], str]
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

"""Charts as inline SVG strings: no JavaScript library, nothing fetched by the browser."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

WIDTH, HEIGHT, PAD = 720, 200, 36


def _nice_max(value: float) -> float:
    """A round axis maximum at or above `value` (1, 2 or 5 times a power of ten)."""
    if value <= 0:
        return 1.0
    scale = 1.0
    while scale * 10 <= value:
        scale *= 10
    while scale > value:
        scale /= 10
    for step in (1, 2, 5, 10):
        if step * scale >= value:
            return step * scale
    return 10 * scale


def line_chart(series: dict[str, Sequence[tuple[float, float]]], *, title: str, unit: str = "msg/s") -> str:
    """Lines of (time, value) points, one per series, on shared axes; the x axis spans the
    earliest to the latest time given."""
    points = [p for pts in series.values() for p in pts]
    out = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">']
    out.append(f'<text x="{PAD}" y="14" class="title">{escape(title)}</text>')
    if not points:
        out.append(f'<text x="{WIDTH // 2}" y="{HEIGHT // 2}" text-anchor="middle">no samples yet</text></svg>')
        return "".join(out)
    t0, t1 = min(p[0] for p in points), max(p[0] for p in points)
    top = _nice_max(max(p[1] for p in points))
    span = (t1 - t0) or 1.0

    def xy(t: float, v: float) -> str:
        x = PAD + (t - t0) / span * (WIDTH - 2 * PAD)
        y = HEIGHT - PAD + 10 - v / top * (HEIGHT - PAD - 24)
        return f"{x:.1f},{y:.1f}"

    base = HEIGHT - PAD + 10
    out.append(f'<line x1="{PAD}" y1="{base}" x2="{WIDTH - PAD}" y2="{base}" class="axis"/>')
    out.append(f'<text x="4" y="30" class="tick">{top:g} {escape(unit)}</text>')
    out.append(f'<text x="4" y="{base}" class="tick">0</text>')
    ago = f"{round(span)} s" if span < 60 else f"{round(span / 60)} min"
    out.append(f'<text x="{WIDTH - PAD}" y="{HEIGHT - 4}" text-anchor="end" class="tick">now</text>')
    out.append(f'<text x="{PAD}" y="{HEIGHT - 4}" class="tick">{ago} ago</text>')
    for n, (name, pts) in enumerate(series.items()):
        if pts:
            path = " ".join(xy(t, v) for t, v in pts)
            out.append(f'<polyline class="s{n % 4}" fill="none" points="{path}"/>')
        x = WIDTH - PAD - 120 * n  # right-aligned, one after another leftwards
        out.append(f'<text x="{x}" y="30" text-anchor="end" class="s{n % 4} legend">{escape(name)}</text>')
    out.append("</svg>")
    return "".join(out)


def bar_chart(bars: Sequence[tuple[str, float]], *, title: str, unit: str = "messages") -> str:
    """Horizontal bars, largest first as given."""
    row = 22
    height = 24 + row * max(len(bars), 1)
    out = [f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}">']
    out.append(f'<text x="{PAD}" y="14" class="title">{escape(title)}</text>')
    if not bars:
        out.append(f'<text x="{WIDTH // 2}" y="36" text-anchor="middle">no traffic yet</text></svg>')
        return "".join(out)
    top = max(v for _, v in bars) or 1.0
    label_w = 220
    for i, (label, value) in enumerate(bars):
        y = 24 + i * row
        w = max(value / top * (WIDTH - label_w - 90), 1.0)
        out.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end" class="tick">{escape(label[:32])}</text>')
        out.append(f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" class="bar"/>')
        out.append(f'<text x="{label_w + w + 6:.1f}" y="{y + 14}" class="tick">{value:,.0f} {escape(unit)}</text>')
    out.append("</svg>")
    return "".join(out)

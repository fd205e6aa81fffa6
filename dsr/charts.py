"""Charts for the admin, drawn on the server as inline SVG: no script, no network, no library.

Only numbers and escaped labels go into the markup, so the result is safe to mark safe.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe


@dataclass(frozen=True)
class Bar:
    label: str          # under the bar
    title: str          # the tooltip (and what a screen reader says)
    parts: tuple[int, ...]  # stacked from the bottom, one per series


def _nice_max(value: int) -> int:
    """The smallest 1, 2, 5 × 10^n at or above `value` (at least 1): the top of the axis."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if factor * step >= value:
                return max(factor * step, 1)
        step *= 10


def stacked_bars_svg(bars: list[Bar], *, series: tuple[tuple[str, str], ...], title: str, width: int = 640,
                     height: int = 220) -> SafeString:
    """A stacked bar chart; `series` is ((name, CSS colour), ...) in the order of each bar's parts."""
    left, right, top, bottom = 40, 10, 28, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    top_value = _nice_max(max((sum(b.parts) for b in bars), default=0))
    slot = plot_w / max(len(bars), 1)
    bar_w = max(slot * 0.7, 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="ledger-chart" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">',
           f"<title>{escape(title)}</title>"]
    for tick in range(0, 5):
        value = top_value * tick / 4
        y = top + plot_h - plot_h * tick / 4
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{value:g}</text>')
    for i, bar in enumerate(bars):
        x = left + i * slot + (slot - bar_w) / 2
        y = top + plot_h
        out.append(f'<g class="bar"><title>{escape(bar.title)}</title>')
        for (name, colour), part in zip(series, bar.parts):
            h = plot_h * part / top_value
            y -= h
            if part:
                out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" fill="{colour}" '
                           f'data-series="{escape(name)}" data-value="{part}"/>')
        total = sum(bar.parts)
        if total:
            out.append(f'<text x="{x + bar_w / 2:.1f}" y="{y - 4:.1f}" text-anchor="middle" class="value">{total}</text>')
        out.append(f'<text x="{x + bar_w / 2:.1f}" y="{height - bottom + 16}" text-anchor="middle" class="tick">'
                   f"{escape(bar.label)}</text></g>")
    legend_x = left
    for name, colour in series:
        out.append(f'<rect x="{legend_x}" y="8" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{legend_x + 14}" y="17" class="tick">{escape(name)}</text>')
        legend_x += 14 + 8 * len(name) + 16
    out.append("</svg>")
    return mark_safe("".join(out))  # noqa: S308 - numbers and escaped text only


def week_label(monday: date) -> str:
    return f"{monday:%d %b}"

"""The overview's "what comes due" bar chart, drawn as inline SVG on the server.

No chart library and no script: the page must work without JavaScript and load nothing from
elsewhere (the CSP allows only this origin). Every number is formatted here, every label
escaped, so the markup handed to the template is safe by construction.
"""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

__all__ = ["bar_chart"]

_W, _H, _PAD, _AXIS, _ROOM = 600, 160, 4, 18, 14  # _ROOM: for the number above a bar


def bar_chart(counts: Sequence[int], labels: Sequence[str], title: str) -> Markup:
    """Bars for ``counts`` with a label under every few; a <title> on each bar for its
    number (shown on hover, and read out by screen readers)."""
    n = max(1, len(counts))
    top = max([1, *counts])
    slot = (_W - 2 * _PAD) / n
    plot = _H - _AXIS - _PAD - _ROOM
    base = _PAD + _ROOM + plot  # the bars' common bottom
    parts = [
        f'<svg class="chart" viewBox="0 0 {_W} {_H}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<line x1="{_PAD}" y1="{base}" x2="{_W - _PAD}" y2="{base}" class="axis"/>',
    ]
    every = max(1, n // 6)
    for i, count in enumerate(counts):
        height = 0.0 if count <= 0 else max(1.0, plot * count / top)
        x = _PAD + i * slot
        label = escape(labels[i]) if i < len(labels) else ""
        parts.append(
            f'<rect class="bar" x="{x + 1:.1f}" y="{base - height:.1f}" '
            f'width="{max(1.0, slot - 2):.1f}" height="{height:.1f}">'
            f"<title>{label}: {int(count)}</title></rect>"
        )
        if count > 0:
            parts.append(
                f'<text class="value" x="{x + slot / 2:.1f}" y="{base - height - 3:.1f}">'
                f"{int(count)}</text>"
            )
        if i % every == 0:
            parts.append(f'<text class="label" x="{x + 1:.1f}" y="{_H - 4}">{label}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))

"""How figures are written: a value with its unit, a ratio."""

from __future__ import annotations

import math

__all__ = ["bare_unit", "fmt_ratio", "fmt_ratio_spread", "fmt_value"]


def fmt_value(v: float | None, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    a = abs(v)
    if unit == "s":
        if a >= 1:
            return f"{v:.2f} s"
        if a >= 1e-3:
            return f"{v * 1e3:.2f} ms"
        if a >= 1e-5:
            return f"{v * 1e6:.0f} us"
        return f"{v * 1e6:.2f} us"  # per-timer costs: 2.35 us, not 2 us
    if a >= 100:
        s = f"{v:,.0f}"
    elif a >= 10:
        s = f"{v:.1f}"
    else:
        s = f"{v:.3g}"
    return f"{s} {unit}".strip()


def bare_unit(unit: str) -> str:
    """The unit for the min..max cell: seconds keep theirs (ms/us scale), others drop it."""
    return "s" if unit == "s" else ""


def fmt_ratio(q: float) -> str:
    if math.isinf(q):
        return "inf"
    if q >= 10:
        return f"{q:.0f}"
    if q >= 0.1:
        return f"{q:.2f}"
    return f"{q:.2g}"


def fmt_ratio_spread(median: float, low: float, high: float) -> str:
    """``0.53x (0.50-0.55)``: a ratio with its min-max spread over rounds."""
    return f"{fmt_ratio(median)}x ({fmt_ratio(low)}-{fmt_ratio(high)})"

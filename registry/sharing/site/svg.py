"""Charts as inline SVG strings: no JavaScript library, nothing fetched, drawn the same from
file:// as from a server. Every text that came from a recipe goes through `esc`."""

from __future__ import annotations

from html import escape

PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd")


def esc(value) -> str:
    return escape(str(value), quote=True)


def _num(x: float) -> str:
    return f"{x:.1f}"


def bars(rows: list[tuple[str, float]], capacity: float, unit: str = "GiB", width: int = 640) -> str:
    """Horizontal bars, one per row, and beneath them one stacked bar of the total against
    `capacity` (the GPU's memory): the breakdown of `recipe estimate`."""
    label_w, bar_h, gap = 170, 18, 6
    plot_w = width - label_w - 80
    total = sum(v for _, v in rows)
    top = max([v for _, v in rows] + [1e-9])
    height = (len(rows) + 2) * (bar_h + gap) + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">'
    ]
    for i, (label, value) in enumerate(rows):
        y = i * (bar_h + gap) + 4
        w = plot_w * value / top  # top is at least 1e-9
        color = PALETTE[i % len(PALETTE)]
        out.append(
            f'<text x="{label_w - 6}" y="{_num(y + bar_h - 5)}" text-anchor="end">{esc(label)}</text>'
            f'<rect x="{label_w}" y="{_num(y)}" width="{_num(w)}" height="{bar_h}" fill="{color}">'
            f"<title>{esc(label)}: {value:.2f} {esc(unit)}</title></rect>"
            f'<text x="{_num(label_w + w + 4)}" y="{_num(y + bar_h - 5)}">{value:.2f}</text>'
        )
    # the stacked total against the GPU's memory
    y = len(rows) * (bar_h + gap) + 16
    scale = plot_w / max(total, capacity, 1e-9)
    x = float(label_w)
    out.append(f'<text x="{label_w - 6}" y="{_num(y + bar_h - 5)}" text-anchor="end">total</text>')
    for i, (label, value) in enumerate(rows):
        w = value * scale
        out.append(
            f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{bar_h}" fill="{PALETTE[i % len(PALETTE)]}">'
            f"<title>{esc(label)}: {value:.2f} {esc(unit)}</title></rect>"
        )
        x += w
    said = f'<text x="{_num(label_w)}" y="{_num(y + bar_h + 18)}">'
    if capacity > 0:
        cap_x = label_w + capacity * scale
        out.append(
            f'<line x1="{_num(cap_x)}" x2="{_num(cap_x)}" y1="{_num(y - 4)}" y2="{_num(y + bar_h + 4)}" '
            f'stroke="#000" stroke-width="2"><title>capacity {capacity:.2f} {esc(unit)}</title></line>'
            f"{said}{total:.2f} of {capacity:.2f} {esc(unit)} ({total / capacity:.0%}); the black line is the "
            "GPU's memory</text>"
        )
    else:  # no GPU memory to hold it against
        out.append(f"{said}{total:.2f} {esc(unit)} in all; no GPU memory to compare with</text>")
    out.append("</svg>")
    return "".join(out)


def line(points: list[tuple[str, float]], title: str, fmt: str = "{:.1f}", width: int = 640, height: int = 220) -> str:
    """A line through the points in order, each labelled on the x axis: measured results
    across versions (or across the measurements of one recipe)."""
    left, right, top, bottom = 56, 16, 24, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for _, v in points]
    lo, hi = min(values + [0.0]), max(values)
    if hi <= lo:
        hi = lo + 1.0
    step = plot_w / max(len(points) - 1, 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        x = left + (i * step if len(points) > 1 else plot_w / 2)
        return x, top + plot_h * (1 - (v - lo) / (hi - lo))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<text x="{left}" y="14" font-size="12" font-weight="bold">{esc(title)}</text>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#888"/>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#888"/>',
    ]
    for tick in (lo, (lo + hi) / 2, hi):
        _, y = xy(0, tick)
        out.append(
            f'<text x="{left - 4}" y="{_num(y + 4)}" text-anchor="end">{esc(fmt.format(tick))}</text>'
            f'<line x1="{left}" x2="{left + plot_w}" y1="{_num(y)}" y2="{_num(y)}" stroke="#eee"/>'
        )
    coords = [xy(i, v) for i, (_, v) in enumerate(points)]
    if len(coords) > 1:
        path = " ".join(f"{_num(x)},{_num(y)}" for x, y in coords)
        out.append(f'<polyline points="{path}" fill="none" stroke="{PALETTE[0]}" stroke-width="2"/>')
    for (label, value), (x, y) in zip(points, coords):
        out.append(
            f'<circle cx="{_num(x)}" cy="{_num(y)}" r="4" fill="{PALETTE[0]}">'
            f"<title>{esc(label)}: {esc(fmt.format(value))}</title></circle>"
            f'<text x="{_num(x)}" y="{top + plot_h + 16}" text-anchor="middle">{esc(label)}</text>'
        )
    out.append("</svg>")
    return "".join(out)

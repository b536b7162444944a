"""`recipe tune`'s plot as a standalone SVG (no plotting library): samples/s against micro batch,
one line per backend, and beneath it each point's peak memory against the GPU's capacity line."""

from __future__ import annotations

import math

from registry.sharing.site.svg import PALETTE, esc

WIDTH, PANEL, MARGIN = 720, 240, 60


def svg(points, capacity_gib: float | None, title: str) -> str:
    """`points`: tune's Points; measured ones are drawn, an out-of-memory one as a cross at the top
    of the memory panel."""
    measured = [p for p in points if p.status == "measured"]
    ooms = [p for p in points if p.status == "oom"]
    micros = sorted({p.candidate.micro_batch_size for p in points}) or [1]
    lo, hi = math.log2(micros[0]), math.log2(micros[-1])
    plot_w = WIDTH - 2 * MARGIN

    def x(m: int) -> float:
        return MARGIN + (plot_w / 2 if hi == lo else plot_w * (math.log2(m) - lo) / (hi - lo))

    top_rate = max([p.samples_per_s for p in measured] + [1e-9]) * 1.1
    top_mem = max([p.peak_allocated_gib or 0.0 for p in measured] + [capacity_gib or 0.0, 1e-9]) * 1.1
    panels = [(30, "samples/s", top_rate), (30 + PANEL + 50, "peak allocated GiB", top_mem)]
    height = 30 + 2 * PANEL + 50 + 70

    def y(panel: int, value: float) -> float:
        y0, _, top = panels[panel]
        return y0 + PANEL - PANEL * value / top

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<text x="{MARGIN}" y="18" font-size="13">{esc(title)}</text>',
    ]
    for y0, label, top in panels:
        out.append(f'<rect x="{MARGIN}" y="{y0}" width="{plot_w}" height="{PANEL}" fill="none" stroke="#999"/>')
        out.append(f'<text x="{MARGIN - 6}" y="{y0 + 10}" text-anchor="end">{top:.3g}</text>')
        out.append(f'<text x="{MARGIN - 6}" y="{y0 + PANEL}" text-anchor="end">0</text>')
        out.append(f'<text x="{MARGIN + 4}" y="{y0 + 14}" fill="#555">{esc(label)}</text>')
        for m in micros:
            out.append(f'<text x="{x(m):.1f}" y="{y0 + PANEL + 14}" text-anchor="middle">{m}</text>')
    out.append(
        f'<text x="{MARGIN + plot_w / 2:.1f}" y="{panels[1][0] + PANEL + 30}" text-anchor="middle">micro batch</text>'
    )
    if capacity_gib:
        cy = y(1, capacity_gib)
        out.append(
            f'<line x1="{MARGIN}" x2="{MARGIN + plot_w}" y1="{cy:.1f}" y2="{cy:.1f}" stroke="#c00" '
            f'stroke-dasharray="6 4"/><text x="{MARGIN + plot_w - 4}" y="{cy - 4:.1f}" text-anchor="end" '
            f'fill="#c00">GPU capacity {capacity_gib:g} GiB</text>'
        )
    else:
        out.append(
            f'<text x="{MARGIN + plot_w - 4}" y="{panels[1][0] + 14}" text-anchor="end" fill="#555">'
            "no GPU: resident set of the processes, no capacity line</text>"
        )
    series = sorted({p.candidate.series for p in points})
    for i, name in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        mine = sorted((p for p in measured if p.candidate.series == name), key=lambda p: p.candidate.micro_batch_size)
        for panel, value in ((0, lambda p: p.samples_per_s), (1, lambda p: p.peak_allocated_gib or 0.0)):
            if len(mine) > 1:
                path = " ".join(f"{x(p.candidate.micro_batch_size):.1f},{y(panel, value(p)):.1f}" for p in mine)
                out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.5"/>')
            for p in mine:
                px, py = x(p.candidate.micro_batch_size), y(panel, value(p))
                tip = f"{p.candidate.label}: {p.samples_per_s:.1f} samples/s, peak {p.peak_allocated_gib or 0:.2f} GiB"
                out.append(
                    f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="{color}"><title>{esc(tip)}</title></circle>'
                )
                if panel == 0:  # each point's peak memory beside it
                    out.append(f'<text x="{px + 5:.1f}" y="{py - 5:.1f}" fill="{color}">{value_gib(p)}</text>')
        for p in ooms:
            if p.candidate.series == name:
                px, py = x(p.candidate.micro_batch_size), panels[1][0] + 8
                out.append(
                    f'<text x="{px:.1f}" y="{py:.1f}" text-anchor="middle" fill="{color}" font-weight="bold">'
                    f"x<title>{esc(p.candidate.label)}: out of memory</title></text>"
                )
        ly = height - 22
        lx = MARGIN + i * 130
        out.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{lx + 14}" y="{ly}">{esc(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def value_gib(p) -> str:
    return f"{p.peak_allocated_gib:.2f} GiB" if p.peak_allocated_gib is not None else ""

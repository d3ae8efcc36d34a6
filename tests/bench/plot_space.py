#!/usr/bin/env python3
"""Draws the space part of `make bench` as an SVG: bits per item against the
false-positive rate, for a cuckoofilter value and a named filter as measured,
next to the information-theoretic floor, a Bloom filter and the published
cuckoo filter at the same rate. The standard library only (no matplotlib).

  python3 tests/bench/plot_space.py target/bench/space.tsv docs/bits-per-item.svg

The TSV is the one tests/bench/sql_bench.py's space() writes: a header, then one
row per requested rate with the columns fpp, floor, ideal, published, bloom,
value_bits, value_fpp, named_bits, named_fpp, keys, probes, date. The reference
curves are drawn from their formulas (the same ones space() prints), checked
against the TSV's columns at the measured rates.
"""
import csv
import math
import sys
from xml.sax.saxutils import escape

# Okabe-Ito colours: distinct for the colour-blind too, readable on white.
BLUE, VERMILION, GREEN, PURPLE, GREY = "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#555555"
FONT = "-apple-system, BlinkMacSystemFont, 'Segoe UI', Helvetica, Arial, sans-serif"

W, H = 900, 590
LEFT, RIGHT, TOP, BOTTOM = 72, 640, 62, 462  # the plot area
LOG_LO, LOG_HI = -4.25, -1.0                   # the x range, log10 of the rate


def floor_bits(e):
    return math.log2(1 / e)


def bloom_bits(e):
    return 1.44 * math.log2(1 / e)


def published_bits(e):
    return math.ceil(math.log2(8 / e)) / 0.955


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if not rows:
        sys.exit(f"{path}: no rows")
    for r in rows:
        e = float(r["fpp"])
        for col, fn in (("floor", floor_bits), ("bloom", bloom_bits), ("published", published_bits)):
            assert abs(float(r[col]) - fn(e)) < 1e-6, (path, e, col, r[col], fn(e))
    return sorted(rows, key=lambda r: float(r["fpp"]))


def percent(e):
    p = 100 * e
    return f"{p:.{max(0, -math.floor(math.log10(p) + 1e-9))}f}%"


def main(tsv, out):
    rows = read(tsv)
    rates = [float(r["fpp"]) for r in rows]
    value = [float(r["value_bits"]) for r in rows]
    named = [float(r["named_bits"]) for r in rows]
    keys, probes, date = int(rows[0]["keys"]), int(rows[0]["probes"]), rows[0]["date"]
    lo = min(rates)
    assert LOG_LO < math.log10(lo) and math.log10(max(rates)) <= LOG_HI, rates

    top = max(value + named + [bloom_bits(10 ** LOG_LO), published_bits(10 ** LOG_LO)])
    y_max = 5 * math.ceil((top + 0.5) / 5)

    def x(e):
        return LEFT + (math.log10(e) - LOG_LO) / (LOG_HI - LOG_LO) * (RIGHT - LEFT)

    def y(bits):
        return BOTTOM - bits / y_max * (BOTTOM - TOP)

    def pts(seq):
        return " ".join(f"{px:.1f},{py:.1f}" for px, py in seq)

    # Dense samples of the reference curves over the whole x range.
    dense = [10 ** (LOG_LO + i * (LOG_HI - LOG_LO) / 400) for i in range(401)]

    def curve(fn):
        return pts((x(e), y(fn(e))) for e in dense)

    def steps(fn):
        # A whole-bit fingerprint: flat between the rates where ceil() steps.
        out, prev = [], None
        for e in dense:
            b = fn(e)
            if prev is not None and b != prev:
                out.append((x(e), y(prev)))
            out.append((x(e), y(b)))
            prev = b
        return pts(out)

    svg = []
    a = svg.append
    a(f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
      f'font-family="{FONT}" font-size="13" fill="#24292f">')
    a(f'<rect width="{W}" height="{H}" fill="#ffffff"/>')
    a(f'<text x="{LEFT}" y="30" font-size="18" font-weight="600">Space: bits per item against the false-positive rate</text>')

    # Below the floor no filter can go: shaded.
    below = [(x(e), y(floor_bits(e))) for e in dense] + [(RIGHT, BOTTOM), (LEFT, BOTTOM)]
    a(f'<polygon points="{pts(below)}" fill="#f3f4f6"/>')

    # Grid and ticks.
    a('<g stroke="#d0d7de" stroke-width="1">')
    for d in range(math.ceil(LOG_LO), math.floor(LOG_HI) + 1):
        for m in range(1, 10):
            e = m * 10.0 ** d
            if LOG_LO <= math.log10(e) <= LOG_HI:
                a(f'<line x1="{x(e):.1f}" y1="{TOP}" x2="{x(e):.1f}" y2="{BOTTOM}"'
                  + ('' if m == 1 else ' stroke="#eef0f2"') + '/>')
    for b in range(0, y_max + 1):
        a(f'<line x1="{LEFT}" y1="{y(b):.1f}" x2="{RIGHT}" y2="{y(b):.1f}"'
          + ('' if b % 5 == 0 else ' stroke="#eef0f2"') + '/>')
    a('</g>')
    a(f'<text x="{LEFT + 12}" y="{BOTTOM - 12}" font-size="12" font-style="italic" fill="#8c959f" '
      f'stroke="#f3f4f6" stroke-width="4" paint-order="stroke">below the floor: no filter at that rate</text>')
    a(f'<rect x="{LEFT}" y="{TOP}" width="{RIGHT - LEFT}" height="{BOTTOM - TOP}" fill="none" stroke="#8c959f"/>')
    a('<g font-size="12" fill="#57606a">')
    for d in range(math.ceil(LOG_LO), math.floor(LOG_HI) + 1):
        e = 10.0 ** d
        a(f'<line x1="{x(e):.1f}" y1="{BOTTOM}" x2="{x(e):.1f}" y2="{BOTTOM + 5}" stroke="#8c959f"/>')
        a(f'<text x="{x(e):.1f}" y="{BOTTOM + 20}" text-anchor="middle">{percent(e)}</text>')
    for b in range(0, y_max + 1, 5):
        a(f'<line x1="{LEFT - 5}" y1="{y(b):.1f}" x2="{LEFT}" y2="{y(b):.1f}" stroke="#8c959f"/>')
        a(f'<text x="{LEFT - 9}" y="{y(b) + 4:.1f}" text-anchor="end">{b}</text>')
    a('</g>')
    a(f'<text x="{(LEFT + RIGHT) / 2}" y="{BOTTOM + 44}" text-anchor="middle">'
      f'requested false-positive rate ε (log scale)</text>')
    a(f'<text transform="translate(24 {(TOP + BOTTOM) / 2}) rotate(-90)" text-anchor="middle">bits per item</text>')

    # Markers, drawn centred on (0, 0) and moved into place by a group.
    def marker(kind, colour, filled):
        fill = colour if filled else "#ffffff"
        common = f'fill="{fill}" stroke="{colour}" stroke-width="1.8"'
        if kind == "circle":
            return f'<circle r="4.8" {common}/>'
        if kind == "square":
            return f'<rect x="-4.5" y="-4.5" width="9" height="9" {common}/>'
        if kind == "triangle":
            return f'<polygon points="0,-5.8 5.2,3.4 -5.2,3.4" {common}/>'
        if kind == "diamond":
            return f'<polygon points="0,-5.6 5,0 0,5.6 -5,0" {common}/>'
        return f'<circle r="3.2" {common}/>'

    def place(mk, px, py, tip):
        return f'<g transform="translate({px:.1f} {py:.1f})"><title>{escape(tip)}</title>{mk}</g>'

    series = [
        # label, detail, colour, dash, marker, filled, line points, marker points
        ("floor", "log₂(1/ε)", GREY, "", "dot", False, curve(floor_bits),
         [(e, floor_bits(e)) for e in rates]),
        ("Bloom filter", "1.44 · log₂(1/ε)", GREEN, "7 4", "triangle", False, curve(bloom_bits),
         [(e, bloom_bits(e)) for e in rates]),
        ("published cuckoo filter", "⌈log₂(8/ε)⌉ / 0.955", PURPLE, "9 3 2 3", "diamond", False,
         steps(published_bits), [(e, published_bits(e)) for e in rates]),
        ("named filter, measured", "cf_create(name, n, ε)", VERMILION, "", "square", True,
         pts((x(e), y(b)) for e, b in zip(rates, named)), list(zip(rates, named))),
        ("cuckoofilter value, measured", "cf_agg(k, ε), the whole value", BLUE, "", "circle", True,
         pts((x(e), y(b)) for e, b in zip(rates, value)), list(zip(rates, value))),
    ]
    measured_fpp = {("named filter, measured", float(r["fpp"])): float(r["named_fpp"]) for r in rows}
    measured_fpp.update({("cuckoofilter value, measured", float(r["fpp"])): float(r["value_fpp"]) for r in rows})

    for label, _, colour, dash, kind, filled, line, _ in series:
        width = 2.6 if filled else 1.8
        a(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="{width}" '
          f'stroke-linejoin="round"' + (f' stroke-dasharray="{dash}"' if dash else '') + '/>')
    for label, _, colour, _, kind, filled, _, marks in series:
        mk = marker(kind, colour, filled)
        for e, b in marks:
            tip = f"{label} at {percent(e)}: {b:.2f} bits per item"
            if (label, e) in measured_fpp:
                tip += f", measured rate {100 * measured_fpp[(label, e)]:.4f}%"
            a(place(mk, x(e), y(b), tip))

    # Legend, right of the plot: measured first, each group in the curves' order from the top.
    floor_s, bloom_s, published_s, named_s, value_s = series
    lx, ly = RIGHT + 24, TOP + 4
    for heading, group in (("Measured", (named_s, value_s)), ("Reference, same ε", (bloom_s, published_s, floor_s))):
        a(f'<text x="{lx}" y="{ly + 8}" font-weight="600">{heading}</text>')
        ly += 32
        for label, detail, colour, dash, kind, filled, _, _ in group:
            width = 2.6 if filled else 1.8
            a(f'<line x1="{lx}" y1="{ly}" x2="{lx + 34}" y2="{ly}" stroke="{colour}" stroke-width="{width}"'
              + (f' stroke-dasharray="{dash}"' if dash else '') + '/>')
            a(place(marker(kind, colour, filled), lx + 17, ly, label))
            a(f'<text x="{lx + 44}" y="{ly + 4}">{escape(label.replace(", measured", ""))}</text>')
            a(f'<text x="{lx + 44}" y="{ly + 21}" font-size="12" fill="#57606a">{escape(detail)}</text>')
            ly += 44
        ly += 10

    # Caption.
    worst = max(float(r[c]) / float(r["fpp"]) for r in rows for c in ("value_fpp", "named_fpp"))
    caption = [
        f"make bench, part space, {date}: {keys:,} keys per filter at each requested rate ε.",
        f"False-positive rates measured over {probes:,} keys never inserted: "
        + ("every one at or under ε." if worst <= 1 else f"up to {worst:.2f} × ε."),
        "A value’s bits per item include its header; a named filter’s are its shared-memory bytes over its capacity.",
    ]
    for i, line in enumerate(caption):
        a(f'<text x="{LEFT}" y="{H - 45 + 17 * i}" font-size="12" fill="#57606a">{escape(line)}</text>')
    a('</svg>')
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot_space.py SPACE.tsv OUT.svg")
    main(sys.argv[1], sys.argv[2])

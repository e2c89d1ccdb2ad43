"""Charts of scores, drawn on the server as SVG by pygal: no script, no request to any network.

The page embeds the SVG inline. pygal builds it as an element tree, so a metric name or a
label from a score is escaped like any XML text. Its tooltips script is left out (`js=[]`) and
so is the script element holding its configuration (which repeats the names as JSON): the chart
is plain SVG, readable without script.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from typing import Any, Mapping, Sequence
from xml.etree import ElementTree

import pygal
from markupsafe import Markup
from pygal.style import Style

BINS = 10  # bars of a histogram of numbers
STYLE = Style(background="white", plot_background="white", font_family="system-ui, sans-serif",
              colors=("#0969da", "#d4a72c", "#1a7f37", "#cf222e"), title_font_size=18,
              label_font_size=13, major_label_font_size=13, legend_font_size=14)


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _config(metric: str, x_title: str) -> dict[str, Any]:
    return dict(title=metric, x_title=x_title, y_title="cases", style=STYLE, js=[],
                disable_xml_declaration=True, width=720, height=360, legend_at_bottom=True,
                print_values=False, show_y_guides=True, truncate_label=-1, truncate_legend=-1)


def distribution(metric: str, sides: Mapping[str, Sequence[Any]]) -> Markup:
    """An SVG chart of each side's values of `metric` (side name -> one value per case),
    titled with the metric, its axes labelled: a histogram over shared bins when every value
    is a number, else the count of each value (true, false, a label) as bars."""
    values = [v for vs in sides.values() for v in vs]
    if values and all(is_number(v) for v in values):
        return _histogram(metric, sides, min(values), max(values))
    names = sorted({_text(v) for v in values})
    chart = pygal.Bar(**_config(metric, "value"))
    chart.x_labels = names
    for side, vs in sides.items():
        counts = Counter(_text(v) for v in vs)
        chart.add(side, [counts.get(n, 0) for n in names])
    return _svg(chart, metric)


def edges(low: float, high: float, n: int = BINS) -> list[float]:
    """`n` + 1 bin edges from `low` to `high` (one bin of width 1 when they are equal)."""
    if high == low:
        return [low, low + 1]
    step = (high - low) / n
    return [low + i * step for i in range(n)] + [high]


def counts(values: Sequence[float], cuts: Sequence[float]) -> list[int]:
    """How many of `values` fall in each bin [cuts[i], cuts[i+1]) (the last bin holds its
    upper edge too); a value outside every bin is not counted."""
    out = [0] * (len(cuts) - 1)
    for v in values:
        if v == cuts[-1]:
            out[-1] += 1
            continue
        i = bisect.bisect_right(cuts, v) - 1
        if 0 <= i < len(out):
            out[i] += 1
    return out


def _histogram(metric: str, sides: Mapping[str, Sequence[Any]], low: float,
               high: float) -> Markup:
    cuts = edges(low, high)
    chart = pygal.Histogram(**_config(metric, "score"))
    for side, vs in sides.items():
        chart.add(side, [(n, cuts[i], cuts[i + 1]) for i, n in enumerate(counts(vs, cuts))])
    return _svg(chart, metric)


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _svg(chart: Any, metric: str) -> Markup:
    root = chart.render_tree()
    for parent in list(root.iter()):
        for child in list(parent):
            if child.tag == "script" or child.tag is ElementTree.Comment:
                parent.remove(child)
    root.set("role", "img")
    root.set("aria-label", f"distribution of {metric}")
    # ElementTree escapes every text and attribute it writes: the result is safe to embed.
    return Markup(ElementTree.tostring(root, encoding="unicode"))

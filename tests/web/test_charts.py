"""Charts of scores (cas_web/charts.py): SVG titled with the metric, axes labelled, every
value counted once, names escaped, and nothing that runs or loads from a network."""

from __future__ import annotations

import re
from xml.etree import ElementTree

from hypothesis import given
from hypothesis import strategies as st

from cas_web.charts import counts, distribution, edges

SVG = "{http://www.w3.org/2000/svg}"


def texts(svg: str) -> list[str]:
    root = ElementTree.fromstring(svg)
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def test_a_histogram_of_numbers_is_titled_with_its_metric_and_labels_its_axes():
    svg = distribution("quality", {"baseline": [0.1, 0.2, 0.9], "candidate": [0.8, 0.9, 1.0]})
    root = ElementTree.fromstring(svg)  # well-formed XML
    assert root.find(f"{SVG}title").text == "quality"
    shown = texts(svg)
    assert "quality" in shown and "score" in shown and "cases" in shown  # title, x, y
    assert "baseline" in shown and "candidate" in shown                  # the legend
    assert root.get("role") == "img" and root.get("aria-label") == "distribution of quality"


def test_labels_and_booleans_are_counted_as_bars_of_each_value():
    svg = distribution("exact", {"a": [True, False, True], "b": [True, "partly"]})
    shown = texts(svg)
    assert {"exact", "value", "cases", "true", "false", "partly"} <= set(shown)


def test_a_name_is_escaped_and_the_chart_holds_no_script_and_loads_nothing():
    svg = distribution("<script>alert(1)</script>", {"<b>x</b>": [1, 2]})
    assert "<script" not in svg and "<b>" not in svg
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in svg
    # the only URL is the SVG namespace: no stylesheet, script or font from a network
    assert re.findall(r"https?://[^\s\"'<>]+", svg) == ["http://www.w3.org/2000/svg"]
    assert "xlink:href" not in svg and "@import" not in svg


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=60))
def test_every_value_falls_in_exactly_one_bin(values):
    cuts = edges(min(values), max(values))
    got = counts(values, cuts)
    assert sum(got) == len(values)
    assert cuts == sorted(cuts) and cuts[0] == min(values)
    for v in values:  # each value is in the bin its edges say
        i = next(i for i in range(len(got)) if cuts[i] <= v < cuts[i + 1]
                 or (i == len(got) - 1 and v == cuts[-1]))
        assert got[i] > 0


def test_one_value_many_times_is_one_bin_holding_them_all():
    assert counts([0.5] * 4, edges(0.5, 0.5)) == [4]

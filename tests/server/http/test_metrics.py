"""Prometheus text rendering."""

from __future__ import annotations

from fimble.server.http.metrics import Histogram


def test_histogram_buckets_are_cumulative() -> None:
    h = Histogram(buckets=(0.1, 1.0))
    for value in (0.05, 0.5, 5.0):
        h.observe(value, (("route", "/x"),))
    lines = h.render("t")
    assert lines == [
        't_bucket{route="/x",le="0.1"} 1',
        't_bucket{route="/x",le="1"} 2',
        't_bucket{route="/x",le="+Inf"} 3',
        't_sum{route="/x"} 5.550000',
        't_count{route="/x"} 3',
    ]


def test_label_values_are_escaped() -> None:
    h = Histogram(buckets=(1.0,))
    h.observe(0.5, (("route", 'a"b\\c\nd'),))
    assert 'route="a\\"b\\\\c\\nd"' in h.render("t")[0]

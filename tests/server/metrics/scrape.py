"""Metrics as Prometheus reads them: families exposed in the text format, parsed back with
``prometheus_client``'s own parser, as ``{(sample name, frozenset of labels): value}``."""

from __future__ import annotations

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry


def parse(text: str) -> dict:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def expose(families) -> dict:
    """``families`` (metric families a collector yields) through the text format and back."""
    class _Fixed:
        def collect(self):
            return families

    registry = CollectorRegistry()
    registry.register(_Fixed())
    return parse(generate_latest(registry).decode())


def value(samples: dict, name: str, **labels) -> float:
    return samples[(name, frozenset(labels.items()))]

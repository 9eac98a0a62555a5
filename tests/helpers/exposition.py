"""The Prometheus exposition bringup's exporter serves, parsed back with prometheus_client's own parser: families by
name, every sample by its name and labels, and the one phase a deployment's series says it is in."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> tuple[dict[str, Any], Samples]:
    """The exposition parsed back: families by name, and every sample by (name, labels)."""
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {(s.name, frozenset(s.labels.items())): s.value for f in families.values() for s in f.samples}
    return families, samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def current_phase(samples: Samples, deployment: str) -> str:
    on = [dict(k[1])["phase"] for k, v in samples.items()
          if k[0] == "bringup_phase" and dict(k[1])["deployment"] == deployment and v == 1]
    assert len(on) == 1, on
    return on[0]

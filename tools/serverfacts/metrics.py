"""The Prometheus metrics a release defines and the methods that move them, as facts: name (as declared; the
client adds `_total` to a counter without it), type, labels, collector class, source line, updaters."""

from __future__ import annotations

from typing import Any

from tools.serverfacts.metric_defs import MetricDefinitions
from tools.serverfacts.metric_updates import UpdateFinder
from tools.serverfacts.symbols import Resolver


def extract_metrics(res: Resolver) -> list[dict[str, Any]]:
    metrics = MetricDefinitions(res).run()
    UpdateFinder(res).run(metrics)
    out = []
    seen: set[tuple[str, str, str]] = set()
    for m in metrics:
        key = (m.name, m.collector, m.source)
        if key in seen:
            continue
        seen.add(key)
        out.append({"name": m.name, "type": m.type, "labels": m.labels, "labels_resolved": m.labels_resolved,
                    **({"optional_labels": m.optional_labels} if m.optional_labels else {}),
                    "collector": m.collector, "source": m.source, "updated_in": sorted(m.updates)})
    out.sort(key=lambda d: (d["name"], d["collector"], d["source"]))
    return out

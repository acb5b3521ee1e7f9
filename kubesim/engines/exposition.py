"""The engines' series in the Prometheus text exposition format (version 0.0.4), served by
kubesim at `GET /metrics`:

    ome_inference_requests_total{namespace, inferenceservice, component, revision_hash, pod, code}
        counter; code "200" (answered) or "500" (failed). Both series exist from the engine's
        start, so an error ratio over a healthy revision is 0, not "no data".
    ome_inference_time_to_first_token_seconds{namespace, inferenceservice, component,
                                              revision_hash, pod}
        histogram (`_bucket` with `le`, `_sum`, `_count`) of the successful requests.

The label names are those the canary analysis templates fill in (spec reference §2.3):
`{{.Namespace}}` -> namespace, `{{.ISVCName}}` -> inferenceservice, `{{.Component}}` ->
component, `{{.CanaryRevision}}`/`{{.StableRevision}}` -> revision_hash. For example the
error ratio of each revision:

    sum by (revision_hash) (rate(ome_inference_requests_total{code="500"}[1m]))
      / sum by (revision_hash) (rate(ome_inference_requests_total[1m]))
"""

from __future__ import annotations

from collections.abc import Iterable

from kubesim.engines.counting import TTFT_BUCKETS, SeriesCounts
from kubesim.engines.traffic import SeriesLabels

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
REQUESTS = "ome_inference_requests_total"
TTFT = "ome_inference_time_to_first_token_seconds"

_HELP = {
    REQUESTS: "Inference requests the simulated engine answered, by HTTP status code.",
    TTFT: "Time to first token of the simulated engine's successful requests.",
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: SeriesLabels, **extra: str) -> str:
    pairs = [
        ("namespace", labels.namespace), ("inferenceservice", labels.inferenceservice),
        ("component", labels.component), ("revision_hash", labels.revision_hash), ("pod", labels.pod),
        *extra.items(),
    ]
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in pairs) + "}"


def _bound(bound: float) -> str:
    return f"{bound:g}" if bound != int(bound) else f"{bound:.1f}"


def render(series: Iterable[tuple[SeriesLabels, SeriesCounts]]) -> str:
    """Every engine's series, metric family by family."""
    items = list(series)
    lines = [f"# HELP {REQUESTS} {_HELP[REQUESTS]}", f"# TYPE {REQUESTS} counter"]
    for labels, counts in items:
        lines.append(f"{REQUESTS}{_labels(labels, code='200')} {counts.successes}")
        lines.append(f"{REQUESTS}{_labels(labels, code='500')} {counts.errors}")
    lines += [f"# HELP {TTFT} {_HELP[TTFT]}", f"# TYPE {TTFT} histogram"]
    for labels, counts in items:
        for bound, count in zip(TTFT_BUCKETS, counts.buckets, strict=True):
            lines.append(f"{TTFT}_bucket{_labels(labels, le=_bound(bound))} {count}")
        lines.append(f"{TTFT}_bucket{_labels(labels, le='+Inf')} {counts.successes}")
        lines.append(f"{TTFT}_sum{_labels(labels)} {counts.ttft_sum!r}")
        lines.append(f"{TTFT}_count{_labels(labels)} {counts.successes}")
    return "\n".join(lines) + "\n"

"""Rules of canary metric analysis (spec reference §2), pure and table-tested:

- `templating`: render a metric's Go-template query with the canary's fields (§2.3).
- `judge`: judge a sample from what each query returned: worst value, inconclusive kinds,
  verdict, the `metricResults` entries and the one-line summary (§2.5, §2.6).
- `source`: where the metrics live: the canary's `prometheus` block against the cluster's
  `metricProviders` and `canaryAnalysis` settings, parking an unbound provider at run start
  (§2.2).

The activity that runs the queries is `activities/prometheus.py`; the contract between it and
the workflow is `models/canary_analysis.py`.
"""

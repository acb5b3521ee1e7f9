"""`omectl`: the operator's command line, a thin client over the workflows' Updates, signals and
queries (the `temporal` CLI stays complete; omectl shapes the same answers for a person)."""

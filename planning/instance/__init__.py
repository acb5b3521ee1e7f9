"""Rules of the `Instance` workflow: pod health, the pods to create, pause, retry and
rebuild rules, the carried state, and the choice of the next step."""

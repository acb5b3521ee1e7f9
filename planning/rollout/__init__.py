"""Rules of the `Rollout` workflow: the plan a run pins (`plan`), how far each grouped
component may move at each moment or the gate that holds it (`gates`), the pairing-protocol
transition (`pairing`), when runs open and how their groups stand (`runs`), the plan a
change would run before it is applied (`preview`), a canary group's progression (`canary/`:
steps, gates, phases, steering, repin) and canary metric analysis (`analysis/`: query
templating, judging a sample, where the metrics live)."""

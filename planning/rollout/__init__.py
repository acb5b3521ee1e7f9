"""Rules of the `Rollout` workflow: the plan a run pins (`plan`), how far each grouped
component may move at each moment or the gate that holds it (`gates`), and the
pairing-protocol transition (`pairing`)."""

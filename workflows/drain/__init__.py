"""The `Drain` workflow: empty a node of serving Instances replacement first, held cordoned until released."""

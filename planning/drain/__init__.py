"""The `Drain` workflow's decisions: what to move or evict from a node, and its progress."""

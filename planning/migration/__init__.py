"""The `Migration` workflow's own decisions: its Events, its audit record, its answers."""

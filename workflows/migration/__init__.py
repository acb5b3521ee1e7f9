"""The `Migration` workflow: one request to move an Instance off a node, replacement first."""

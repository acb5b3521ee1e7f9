"""The `Instance` workflow: `workflow` (handlers and main loop), `lifecycle` (the phases),
`operations` (the steps that act), `gang` (the PodGroup of a multi-pod Instance)."""

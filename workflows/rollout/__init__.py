"""The `Rollout` workflow: `workflow` (handlers and main loop), `messages` (its contract,
imported by its parent), `view` (its report and `status` rows)."""

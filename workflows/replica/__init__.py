"""The `InferenceReplica` workflow: `workflow` (the one workflow class: handlers, main loop,
one pass), `messages` (its contract: names, config, state and report, imported by its parent),
and the plain functions a pass is made of: `view` (what the rules read), `requests` (the
user's requests), `instances` (plan and act on the Instances), `handovers` (multi-pod surge
handovers), `pause`, `children` (start and signal one Instance), `object` (the
InferenceReplica object and its Events), `projection` (status and the parent's report)."""

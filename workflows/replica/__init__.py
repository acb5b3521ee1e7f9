"""The `InferenceReplica` workflow: `workflow` (handlers and main loop), `messages` (its
contract: names, config, state and report, imported by its parent), `instances` (one pass's
plan and its execution), `children` (starting and signalling Instances), `handovers`
(multi-pod surges), `requests` (release and reset), `pause` (what the Instances are told),
`object` (the InferenceReplica object and its Events), `view` (what the rules read),
`projection` (status and the report to the parent)."""

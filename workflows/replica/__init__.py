"""The `InferenceReplica` workflow: `workflow` (handlers and main loop), `messages` (its
contract: names, config, state and report, imported by its parent), `instances` (starting
and steering its Instances), `projection` (status and Events), `pause`."""

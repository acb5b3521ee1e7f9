"""The `InferenceService` workflow: `workflow` (handlers and main loop), `messages` (its
contract), `components` (children and objects per component), `projection` (status),
`events` (pause and resume Events)."""

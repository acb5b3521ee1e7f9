"""Rules of the `InferenceReplica` workflow: facts about its Instances, update budgets,
handover, held revisions, reconcile, scale, retry, revisions, the pod template, spread,
conditions, status and Events."""

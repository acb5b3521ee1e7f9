"""Placeholder: being written by the workflows engineer (InferenceReplica/InferenceService)."""

"""The `TrafficMap` workflow: one multi-cluster InferenceService's weights and their publication."""

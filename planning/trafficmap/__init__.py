"""The `TrafficMap` workflow's decisions: each home cluster's weight, and why it is what it is."""

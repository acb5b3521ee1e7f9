"""Activity tests against the real systems they talk to."""

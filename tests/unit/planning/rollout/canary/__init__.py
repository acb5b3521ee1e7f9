"""Table tests of `planning.rollout.canary`."""

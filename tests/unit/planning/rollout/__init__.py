"""Table tests of `planning.rollout`."""

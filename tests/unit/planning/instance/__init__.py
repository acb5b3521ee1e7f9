"""Table tests of `planning.instance`."""

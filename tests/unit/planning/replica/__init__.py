"""Table tests of `planning.replica`."""

"""Table tests of `planning.service`."""

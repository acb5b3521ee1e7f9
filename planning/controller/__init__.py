"""Rules of the InferenceService controller (`python -m workers.controller`): what it does with
an InferenceService or InferenceReplica object a user wrote with `kubectl`, given what it has
already done. Pure: the controller's I/O lives in `workers/control/`.

- `objects`: reading the objects (identity, placement copies, JSON patch pointers);
- `spec`: whether the object's spec still has to reach the workflow's `apply` Update;
- `annotations`: OME's steering annotations -> signals and Updates, and the one JSON patch
  that removes the consumed ones and keeps the controller's record;
- `deletion`: the product's finalizer and the `delete` signal;
- `runtimes`: which InferenceServices a changed ServingRuntime reaches.
"""

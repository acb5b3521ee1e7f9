"""The InferenceService controller's I/O (`python -m workers.controller`): the watch
(`service_controller`), the Temporal side (`temporal`) and the Kubernetes side (`kube`). Its
decisions are `planning.controller`'s."""

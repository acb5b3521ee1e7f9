"""The watcher's parts: `pods` (pods, nodes and slices to Instances), `deployments`
(Deployments to InferenceServices), `stream` (one kind's list+watch), `loop` (the
coalescing loop both share). `python -m workers.watcher` runs them."""

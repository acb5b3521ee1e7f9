"""In-process controllers: each reconciles the cluster toward its rules through the same API
semantics clients use. Each is given the `kubesim.api.Api` it writes through (and reads the
store behind), plus what else it needs (the kubelet and node lifecycle take the `Timing`),
never the whole cluster. Modules:

    base.py        the loop every controller runs: woken by store changes and its own timers
    scheduling.py  the scheduler's loop: binds pending pods where `kubesim.scheduler` places them
    kubelet.py     pod and container lifecycle on each Ready node
    nodes.py       node conditions and taints, taint eviction, pod GC, drains
    workloads.py   Deployments and ReplicaSets
    endpoints.py   Endpoints and EndpointSlices (slices.py packs the slices)
    disruption.py  PodDisruptionBudget status, consulted by evictions
    gc.py          garbage collection by ownerReferences, namespace teardown
    gateways.py    a simulated Gateway API controller: Gateway and HTTPRoute status
    quota.py       ResourceQuota status (what pods use, which kubesim enforces: `kubesim.quota`)
"""

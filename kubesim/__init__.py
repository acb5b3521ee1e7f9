"""kubesim: a simulated Kubernetes cluster the official client cannot tell from a real one.

Run one with `python -m kubesim` (see `kubesim.__main__`) or from Python with
`kubesim.handle.KubeSim`. Modules, from the wire inwards:

    server.py        aiohttp routing of the REST paths, discovery, watch streams
    tables.py        meta.k8s.io Table answers for `kubectl get`
    control.py       the /sim/ control API (fail nodes, kill pods, image behaviour, faults)
    faults.py        request counters and injected failures
    api.py           API semantics: create/update/patch/apply/delete, preconditions, generation
    subresources.py  scale, eviction, binding
    patch.py         JSON patch, merge patch, strategic merge patch
    apply.py         server-side apply and managedFields
    validation.py    422 rules;  defaults.py: defaulting on create
    selectors.py     label and field selectors
    resources.py     the kind registry and discovery documents
    store.py         objects, the global resourceVersion, the watch history
    persist.py       the state file
    kubelet.py       pod and container lifecycle on each Ready node
    gc.py            garbage collection by ownerReferences, namespace teardown
    controllers/     scheduling loop, node lifecycle, deployments/replicasets, endpoints, disruption
    scheduler*.py    node choice for a pod;  topology.py: the simulated nodes
    cluster.py       wires it all together;  handle.py: the thread-hosted handle for tests
"""

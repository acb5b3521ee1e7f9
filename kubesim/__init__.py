"""kubesim: a simulated Kubernetes cluster the official client cannot tell from a real one.

Run one with `python -m kubesim` (see `kubesim.__main__`) or from Python with
`kubesim.handle.KubeSim`. Modules, from the wire inwards:

    server.py        aiohttp routing of the REST paths, discovery, watch streams
    tables.py        meta.k8s.io Table answers for `kubectl get`
    control.py       the /sim/ (or /kubesim/) control API (fail nodes, kill pods, image behaviour,
                     faults, traffic, gateway faults)
    tls.py           HTTPS for a workload cluster: a CA and server certificate made at start
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
    controllers/     every in-process controller: the scheduling loop, the kubelet, node
                     lifecycle, deployments/replicasets, endpoints, disruption budgets, garbage
                     collection and namespaces, Gateway API status; each gets the API (and timing), not the cluster
    scheduler/       node choice for a pod (pure);  topology.py: the simulated nodes
    engines/         simulated inference engines: a request stream over the serving pods and
                     their per-pod Prometheus series at `GET /metrics`
    gateway.py       the inference gateway endpoint of a workload cluster: capacity reports,
                     health probes and their faults, on a port of its own
    cluster.py       the composition root: wires it all together; only the entry points import it
    handle.py        the thread-hosted handle for tests;  __main__.py: `python -m kubesim`
"""

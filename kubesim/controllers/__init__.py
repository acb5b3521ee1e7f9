"""In-process controllers: each reconciles the cluster toward its rules through the same API
semantics clients use (scheduler loop, kubelet, deployments, endpoints, disruption budgets,
node lifecycle, garbage collection, namespaces)."""

"""Process settings, read from the environment: the only module that does.

Settings are grouped by the system they reach (Temporal, Kubernetes, Prometheus, OpenTelemetry,
and the local stack that `make up` runs). Every variable carries the prefix `OME_` and a double
underscore between group and field, so `OME_TEMPORAL__ADDRESS` sets `Settings().temporal.address`
and `OME_KUBE__KUBECONFIG` sets `Settings().kube.kubeconfig`. Workflows never see this module:
they receive the values they need as workflow input.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from workers.config_base import ENV_NESTED_DELIMITER, ENV_PREFIX, SettingsError, SettingsGroup
from workers.feature_config import (
    CanarySettings,
    ClustersSettings,
    MigrationSettings,
    PrometheusSettings,
    RoutingSettings,
)
from workflows.names import TASK_QUEUE

if TYPE_CHECKING:
    import kubernetes.client

class TemporalSettings(SettingsGroup):
    """Where the Temporal frontend is and how to authenticate to it."""

    address: str = "127.0.0.1:7233"
    """host:port of the Temporal frontend. The default is the dev server that `make up` starts;
    for Temporal Cloud use `<namespace>.<account>.tmprl.cloud:7233`."""

    namespace: str = "default"
    """Namespace holding the product's workflows. `default` exists on every dev server, so the
    local stack needs no set-up; a shared cluster usually gives each team its own."""

    task_queue: str = TASK_QUEUE
    """Task queue the worker polls and starters target. It is a name users type in
    `temporal workflow start --task-queue`, so it defaults to the product's constant."""

    tls_cert: Path | None = None
    """PEM client certificate for mTLS. Unset: no client certificate (the dev server and API-key
    authentication need none). Must be set together with `tls_key`."""

    tls_key: Path | None = None
    """PEM private key of `tls_cert`. Unset unless `tls_cert` is set."""

    tls_ca: Path | None = None
    """PEM CA bundle that signed the server's certificate. Unset: the system roots, which is
    right for Temporal Cloud; set it for a self-hosted cluster with a private CA."""

    tls_server_name: str | None = None
    """Server name to verify the certificate against when it differs from the host in
    `address` (a cluster reached through a tunnel or a load balancer's IP)."""

    api_key: SecretStr | None = None
    """Temporal Cloud API key. Unset: no key. Setting it turns TLS on, since Cloud accepts keys
    only over TLS."""

    @model_validator(mode="after")
    def _cert_and_key_together(self) -> TemporalSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            given, missing = ("tls_cert", "tls_key") if self.tls_key is None else ("tls_key", "tls_cert")
            raise ValueError(
                f"{ENV_PREFIX}TEMPORAL__{given.upper()} is set but {ENV_PREFIX}TEMPORAL__{missing.upper()} "
                f"is not: mTLS needs both the client certificate and its key; set both or neither"
            )
        return self

    @property
    def uses_tls(self) -> bool:
        """TLS is on when any TLS file, a server name or an API key is configured."""
        return any(
            value is not None for value in (self.tls_cert, self.tls_ca, self.tls_server_name, self.api_key)
        )


class KubeSettings(SettingsGroup):
    """Which Kubernetes API server the activities and the watcher talk to."""

    kubeconfig: Path | None = None
    """kubeconfig file. Unset: the in-cluster service account when running in a pod; `make up`
    starts kubesim and points the worker and watcher at the kubeconfig it writes under the data
    directory, so a laptop needs no cluster."""

    context: str | None = None
    """Context inside `kubeconfig`. Unset: the file's current-context, as kubectl does."""


class WorkerSettings(SettingsGroup):
    """The worker process's capacity."""

    max_cached_workflows: int = 5000
    """Workflow runs the worker keeps in memory between their tasks. A run evicted from the cache
    is replayed from its whole history at its next task, so the cache should hold every Instance
    the worker looks after (plus their InferenceReplicas and InferenceServices); about 0.1 MiB
    each. The SDK's own default, 1,000, would make a fleet of 2,000 Instances replay constantly."""

    gc_young_threshold: int = Field(default=50_000, ge=0)
    """Container allocations between the interpreter's young-generation collections (the first
    value of Python's `gc.set_threshold`; the interpreter's default is 700). At 700, objects that
    live only through one workflow task (its activation, payloads, sandbox proxies) are caught
    alive and moved to the old generation, whose collections then walk the whole heap of cached
    workflow runs: a cost that grows faster than the fleet a worker holds (13% of the worker's
    CPU while 2,000 Instances came up, issue 17's bench). 0 leaves the collector as
    Python sets it (no freeze either)."""

    sandbox: bool = True
    """Run workflow code in the SDK's sandbox, which re-imports the workflow modules for every
    run it starts and enters the sandbox for every payload it converts, and in return refuses
    non-deterministic calls (the clock, random, I/O) at run time. False runs workflows directly
    (`UnsandboxedWorkflowRunner`): cheaper per Instance, and the workflow tests, which keep
    the sandbox, are then what guards determinism."""



class OtelSettings(SettingsGroup):
    """OpenTelemetry export of workflow and activity spans."""

    otlp_endpoint: str | None = None
    """OTLP/gRPC collector endpoint, e.g. `http://127.0.0.1:4317`. Unset: no tracing interceptor
    and no exporter, so a process without a collector pays nothing for tracing. Only the worker,
    the watcher and the controller are traced; `omectl` never is (workers/client.py)."""

    service_name: str = "omeflow"
    """`service.name` on exported spans; the worker and the watcher append their role."""


class LeaderSettings(SettingsGroup):
    """Leader election of the watcher and the controller: two of each run, the one holding its
    `coordination.k8s.io/v1` Lease acts, the other keeps its caches warm and takes over when the
    Lease is not renewed (client-go's `leaderelection`). Takeover within
    `lease_duration_seconds + retry_period_seconds` of the leader's death."""

    elect: bool = True
    """Campaign for the Lease. False: act at once, alone (one replica, no Lease requests); never
    with two replicas, which would both send."""

    namespace: str = "default"
    """Namespace of the Leases `ome-watcher` and `ome-controller`. deploy/*.yaml set it to the pod's
    own namespace; `default` exists in every cluster and in kubesim."""

    identity: str = ""
    """`holderIdentity` this process writes. Empty: `<hostname>_<pid>` (unique per process, and the
    pod name in Kubernetes, where the hostname is the pod's)."""

    lease_duration_seconds: float = Field(default=10.0, gt=0)
    """How long a Lease lasts unrenewed before a standby may take it: the larger part of the
    takeover time (10 s keeps it under 15 s with the retry period)."""

    renew_deadline_seconds: float = Field(default=7.0, gt=0)
    """How long the leader keeps trying to renew before it stops acting. Shorter than the lease, so
    a leader cut off from the API server has stopped before a standby may take over."""

    retry_period_seconds: float = Field(default=2.0, gt=0)
    """How often the leader renews and a standby re-reads the Lease: one request each per period
    (client-go's 2 s)."""

    @model_validator(mode="after")
    def _ordered(self) -> LeaderSettings:
        if not self.retry_period_seconds < self.renew_deadline_seconds < self.lease_duration_seconds:
            raise SettingsError(
                f"{ENV_PREFIX}LEADER__RETRY_PERIOD_SECONDS={self.retry_period_seconds} < "
                f"{ENV_PREFIX}LEADER__RENEW_DEADLINE_SECONDS={self.renew_deadline_seconds} < "
                f"{ENV_PREFIX}LEADER__LEASE_DURATION_SECONDS={self.lease_duration_seconds} does not hold: a "
                "leader must renew several times within its deadline and stop before its lease ends; "
                "e.g. 2, 7 and 10"
            )
        return self


class WebhookSettings(SettingsGroup):
    """The validating admission webhook (`python -m workers.webhook`); its flags win over these."""

    port: int = Field(default=9443, ge=0, le=65535)
    """HTTPS port it listens on (deploy/webhook.yaml's Service maps 443 to it; 0 picks a free one)."""

    host: str = "127.0.0.1"
    """Address it binds: loopback beside kubesim (`make up`), `0.0.0.0` in a pod."""

    cert_dir: Path | None = None
    """Local mode: where its CA and certificate are kept between runs (unset: `<stack data_dir>/webhook`)."""

    failure_policy: Literal["Fail", "Ignore"] = "Fail"
    """Local mode: the ValidatingWebhookConfiguration's failurePolicy. `Fail` refuses InferenceService
    writes while the webhook is down; `Ignore` lets them through to the controller, whose `apply`
    Update still refuses a bad spec (Warning Event `SpecRejected`)."""

    url_host: str = "127.0.0.1"
    """Local mode: the host in the configuration's `clientConfig.url`, named by the certificate."""

    in_cluster: bool = False
    """Keep the certificate in the Secret `ome-system/ome-webhook-server-cert` and patch its CA into
    the configuration deploy/webhook.yaml created, instead of files and a URL."""


class StackSettings(SettingsGroup):
    """The local stack that `make up` runs: Temporal dev server, kubesim, Prometheus (when
    installed), worker and watcher."""

    data_dir: Path = Path(".data")
    """Directory holding `temporal.db`, `kubesim.json`, the kubeconfig kubesim writes and
    Prometheus's `prometheus/` database. It is git-ignored and kept between runs, so a second
    `make up` resumes the same workflows."""

    frontend_port: int = 7233
    """Temporal frontend gRPC port on 127.0.0.1: the `temporal` CLI's default, so the commands in
    the README need no `--address`."""

    ui_port: int = 8233
    """Temporal Web UI port on 127.0.0.1: the dev server's default (frontend port + 1000)."""

    kubesim_port: int = 6443
    """kubesim API port on 127.0.0.1. Fixed (the API server's usual port) so the kubeconfig
    written under the data directory stays valid across restarts."""

    kubesim_topology: str = "zones=3,nodes-per-zone=4,gpus=8"
    """Simulated nodes: three zones of four 8-GPU nodes give room for topology spread,
    multi-node Instances and a drain that has somewhere to move to."""

    prometheus_port: int = 9090
    """Prometheus port on 127.0.0.1, when `prometheus` is installed and `OME_PROMETHEUS__URL` is
    unset: Prometheus's own default, so its usual URL works."""

    worker_metrics_port: int = 9464
    """Port on 127.0.0.1 where the stack's worker serves its SDK metrics for the stack's Prometheus
    (used only while that Prometheus runs and `OME_PROMETHEUS__WORKER_METRICS_ADDRESS` is unset):
    the port docker-compose and deploy/worker.yaml use."""

    controller_metrics_port: int = 9465
    """Port on 127.0.0.1 where the stack's controller serves the state gauges for the stack's
    Prometheus (used only while that Prometheus runs and
    `OME_PROMETHEUS__CONTROLLER_METRICS_ADDRESS` is unset): the port of docker-compose and
    deploy/controller.yaml."""

    replicas: int = Field(default=2, ge=1, le=9)
    """Watchers and controllers `make up` runs: two of each, as deployed, so one can be killed and
    the other takes over its Lease (`workers.leader`). The Nth controller serves its state gauges
    on `controller_metrics_port` + N - 1."""

    webhook_port: int = Field(default=9443, ge=1, le=65535)
    """Port on 127.0.0.1 of the validating admission webhook `make up` runs beside kubesim (not with
    a configured kubeconfig: a real API server cannot reach a webhook on this machine's loopback)."""

    dev_server: bool = True
    """Start a Temporal dev server. Set false to run the worker and watcher against the cluster in
    `OME_TEMPORAL__ADDRESS` instead."""

    stop_timeout_seconds: float = 40.0
    """How long the stack waits for each process to exit after asking it to stop before killing
    it. Longer than the worker's graceful shutdown, so in-flight activities can finish."""

    workload_clusters: str = ""
    """Workload clusters to simulate beside the control plane, for multi-cluster placement: a
    count (`2` names them worker-a, worker-b) or a comma list of names (`gpu-east,gpu-west`, DNS
    labels). Each runs as its own kubesim (HTTPS, a bearer token, an inference gateway port) and
    is registered on the control plane as a WorkloadCluster with its kubeconfig Secret
    `ome/wlc-<name>-kubeconfig`. Empty: one cluster, as without multi-cluster placement."""

    @field_validator("workload_clusters")
    @classmethod
    def _workload_cluster_names(cls, value: str) -> str:
        workload_cluster_names(value)
        return value.strip()

    @property
    def workload_cluster_names(self) -> list[str]:
        """The names `workload_clusters` stands for, in order."""
        return workload_cluster_names(self.workload_clusters)


MAX_WORKLOAD_CLUSTERS = 26
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def workload_cluster_names(value: str) -> list[str]:
    """`2` -> worker-a, worker-b; `a,b` -> a, b; empty -> none. Refuses other values, naming
    the variable, the value and the fix."""
    variable = f"{ENV_PREFIX}STACK__WORKLOAD_CLUSTERS"
    text = value.strip()
    if not text:
        return []
    if text.isdigit():
        count = int(text)
        if not 0 <= count <= MAX_WORKLOAD_CLUSTERS:
            raise ValueError(
                f"{variable}={value!r} asks for {count} workload clusters: use a count from 0 to "
                f"{MAX_WORKLOAD_CLUSTERS}, or a comma list of names"
            )
        return [f"worker-{chr(ord('a') + index)}" for index in range(count)]
    names = [name.strip() for name in text.split(",")]
    bad = [name for name in names if not _DNS_LABEL.fullmatch(name)]
    if bad:
        raise ValueError(
            f"{variable}={value!r}: {', '.join(repr(n) for n in bad)} is not a DNS label (lowercase "
            "letters, digits and '-', starting and ending with a letter or digit, at most 63): use "
            "e.g. 2 or worker-a,worker-b"
        )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(
            f"{variable}={value!r} names {', '.join(repeated)} more than once: use each name once, "
            "e.g. worker-a,worker-b"
        )
    return names


class Settings(BaseSettings):
    """All settings of one process. `Settings()` reads the environment (and nothing else)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        use_attribute_docstrings=True,
        extra="forbid",
        frozen=True,
    )

    temporal: TemporalSettings = TemporalSettings()
    """Temporal frontend, namespace, task queue and credentials."""

    kube: KubeSettings = KubeSettings()
    """Kubernetes API server."""

    worker: WorkerSettings = WorkerSettings()
    """Worker capacity."""

    prometheus: PrometheusSettings = PrometheusSettings()
    """Prometheus HTTP API."""

    canary: CanarySettings = CanarySettings()
    """Canary rollouts and their metric analysis."""

    migration: MigrationSettings = MigrationSettings()
    """Migration caps (`lifecycle.audit`)."""

    clusters: ClustersSettings = ClustersSettings()
    """Workload clusters: refresh interval and connection grace."""
    routing: RoutingSettings = RoutingSettings()
    """Multi-cluster routing: global endpoint, probe and capacity defaults."""

    otel: OtelSettings = OtelSettings()
    """OpenTelemetry tracing export."""

    leader: LeaderSettings = LeaderSettings()
    """Leader election of the watcher and the controller."""

    webhook: WebhookSettings = WebhookSettings()
    """The validating admission webhook."""

    stack: StackSettings = StackSettings()
    """Local stack run by `make up`."""


def env_var_names() -> set[str]:
    """Every environment variable `Settings` reads, e.g. `OME_TEMPORAL__ADDRESS`."""
    names: set[str] = set()
    for group_name, group_field in Settings.model_fields.items():
        group_model = group_field.annotation
        assert isinstance(group_model, type) and issubclass(group_model, BaseModel)
        for field_name in group_model.model_fields:
            names.add(f"{ENV_PREFIX}{group_name}{ENV_NESTED_DELIMITER}{field_name}".upper())
    return names


MAX_CONCURRENT_ACTIVITIES = 32
"""Activities run at once, and threads in the pool that runs the synchronous (kubernetes
client) ones; equal so that no activity task is accepted without a thread to run it."""

MAX_CONCURRENT_LOCAL_ACTIVITIES = 48
"""Local activities (the Instance workflow's short Kubernetes calls and its reports) run at once.
Set explicitly: the SDK default (100) would let local batches take every thread of a pool shared
with regular activities, which then queue and time out. Local and regular slots each get their
own threads. 48, not 16: with 16, 2,000 Instances starting together queued for slots past the
workflow task's heartbeat (8 s) and came up in 331-374 s; with 48, in 260 s (issue 17's bench)."""

ACTIVITY_THREADS = MAX_CONCURRENT_ACTIVITIES + MAX_CONCURRENT_LOCAL_ACTIVITIES
"""Threads in a worker's activity pool: one for every regular and every local activity slot, so
neither kind waits for a thread the other holds."""

KUBE_CONNECTIONS = ACTIVITY_THREADS
"""Kept-alive connections to each API server: one per activity thread, so every Kubernetes call
that runs at once gives its connection back to the pool. With fewer, urllib3 drops each one
beyond the pool when its call ends (logging "Connection pool is full, discarding connection")
and a later call opens a new one, a TLS handshake against a real API server: a pool of 32
beside 80 threads logged that 773 times while 1,200 Instances came up under `make up`."""


def kube_api_client(settings: Settings | KubeSettings | None = None) -> kubernetes.client.ApiClient:
    """A Kubernetes API client from the configured kubeconfig, else the in-cluster account."""
    # Imported here so that loading settings (the stack runner, tests) does not pay for the
    # kubernetes package's import time.
    import kubernetes.client
    import kubernetes.config

    if settings is None:
        settings = Settings()
    kube = settings.kube if isinstance(settings, Settings) else settings
    if kube.kubeconfig is not None:
        if not kube.kubeconfig.is_file():
            raise SettingsError(
                f"{ENV_PREFIX}KUBE__KUBECONFIG={kube.kubeconfig} is not a file: point it at a kubeconfig, "
                f"or unset it to use kubesim via `make up`"
            )
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kube.kubeconfig),
            context=kube.context,
            client_configuration=configuration,
            persist_config=False,
        )
        configuration.connection_pool_maxsize = KUBE_CONNECTIONS
        return kubernetes.client.ApiClient(configuration)
    # The in-cluster loader reads these two variables; checking them first lets the error say
    # what to do instead of kubernetes' terse "Service host/port is not set."
    if "KUBERNETES_SERVICE_HOST" not in os.environ or "KUBERNETES_SERVICE_PORT" not in os.environ:
        raise SettingsError(
            f"{ENV_PREFIX}KUBE__KUBECONFIG is not set and this process is not running in a Kubernetes pod: "
            f"set {ENV_PREFIX}KUBE__KUBECONFIG to a kubeconfig file (`make up` writes .data/kubeconfig for "
            f"kubesim)"
        )
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = KUBE_CONNECTIONS
    return kubernetes.client.ApiClient(configuration)

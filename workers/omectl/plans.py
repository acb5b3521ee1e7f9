"""What each action verb sends, as data: the workflow, the message (an Update, a signal, or a
workflow start) and its JSON input, and the `temporal` command line that sends the same.

Pure functions, so `--dry-run`, the printed command and the tests agree with what is sent.
The grammar: `omectl VERB ISVC [ARGS] [-n NS]` for what steers an InferenceService (its
workflow `isvc/{ns}/{name}`), `omectl drain|undrain node NODE` for a node's `Drain` workflow,
and `omectl drain|undrain cluster ISVC --workload-cluster ... --id ...` for a TrafficMap's
override (spec reference §20)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any, Literal

from workflows.drain.messages import SIGNAL_CANCEL, SIGNAL_RELEASE
from workflows.names import DRAIN, TASK_QUEUE, drain_workflow_id, isvc_workflow_id, trafficmap_workflow_id
from workflows.service.messages import (
    SIGNAL_PAUSE,
    SIGNAL_RELEASE_HELD,
    SIGNAL_RESET_INSTANCES,
    SIGNAL_RESUME,
    UPDATE_MIGRATE,
    UPDATE_PROMOTE,
    UPDATE_REPIN,
    UPDATE_RETRY,
    UPDATE_ROLLBACK,
)
from workflows.trafficmap.messages import DRAIN_CLUSTER, UNDRAIN_CLUSTER

Kind = Literal["update", "signal", "start"]
NO_INPUT = None


@dataclass(frozen=True)
class Send:
    kind: Kind
    workflow_id: str
    name: str
    """The Update or signal name, or the workflow type to start."""
    input: Any = NO_INPUT
    task_queue: str = TASK_QUEUE

    def describe(self) -> str:
        what = {"update": "Update", "signal": "signal", "start": "start of workflow type"}[self.kind]
        shown = "no input" if self.input is None else f"input {compact(self.input)}"
        return f"{what} {self.name} to {self.workflow_id} with {shown}"


def compact(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "))


def temporal_command(send: Send, address: str | None = None, namespace: str | None = None) -> str:
    """The `temporal` CLI line sending the same message (`--address`/`--namespace` only when
    they differ from the CLI's defaults, which `make up` uses)."""
    if send.kind == "update":
        words = ["temporal", "workflow", "update", "execute", "--workflow-id", send.workflow_id, "--name", send.name]
    elif send.kind == "signal":
        words = ["temporal", "workflow", "signal", "--workflow-id", send.workflow_id, "--name", send.name]
    else:
        words = ["temporal", "workflow", "start", "--type", send.name, "--task-queue", send.task_queue]
        words += ["--workflow-id", send.workflow_id]
    if send.input is not None:
        words += ["--input", compact(send.input)]
    if address and address != "127.0.0.1:7233":
        words += ["--address", address]
    if namespace and namespace != "default":
        words += ["--namespace", namespace]
    return shlex.join(words)


def _isvc(namespace: str, name: str) -> str:
    return isvc_workflow_id(namespace, name)


def _optional(**fields: Any) -> dict[str, Any] | None:
    given = {key: value for key, value in fields.items() if value not in (None, False)}
    return given or None


def promote(namespace: str, name: str, revision: str | None = None, override_analysis: bool = False) -> Send:
    return Send("update", _isvc(namespace, name), UPDATE_PROMOTE, _optional(revision=revision, override_analysis=override_analysis))


def rollback(namespace: str, name: str, revision: str | None = None) -> Send:
    return Send("update", _isvc(namespace, name), UPDATE_ROLLBACK, _optional(revision=revision))


def retry(namespace: str, name: str, revision: str) -> Send:
    """Resume a `Failed` or `RolledBack` canary from step 1 (`engine=<hash>` or `<hash>`)."""
    return Send("update", _isvc(namespace, name), UPDATE_RETRY, {"revision": revision})


def repin(namespace: str, name: str, digest: str = "now") -> Send:
    return Send("update", _isvc(namespace, name), UPDATE_REPIN, {"digest": digest})


def pause(namespace: str, name: str, freeze: bool = False, discard_pending_actions: bool = False) -> Send:
    """Only a signal exists: a refusal shows as a Warning Event and `last_rejected_request`."""
    mode = "freeze" if freeze else "true"
    if discard_pending_actions:
        payload: Any = {"mode": mode, "discard_pending_actions": True}
    else:
        payload = "freeze" if freeze else None
    return Send("signal", _isvc(namespace, name), SIGNAL_PAUSE, payload)


def resume(namespace: str, name: str) -> Send:
    return Send("signal", _isvc(namespace, name), SIGNAL_RESUME)


def release_held(namespace: str, name: str, component: str, revision: str) -> Send:
    return Send("signal", _isvc(namespace, name), SIGNAL_RELEASE_HELD, {"component": component, "revision": revision})


def reset(namespace: str, name: str, component: str, instances: str) -> Send:
    return Send("signal", _isvc(namespace, name), SIGNAL_RESET_INSTANCES, {"component": component, "instances": instances})


def migrate(
    namespace: str,
    name: str,
    component: str,
    instance: int,
    from_node: str,
    reason: str = "",
    hint_target_nodes: list[str] | None = None,
    uuid: str | None = None,
    requested_by: str = "omectl",
) -> Send:
    request: dict[str, Any] = {"component": component, "instance": instance, "from_node": from_node}
    if reason:
        request["reason"] = reason
    if hint_target_nodes:
        request["hint_target_nodes"] = list(hint_target_nodes)
    request["requested_by"] = requested_by
    if uuid:
        request["uuid"] = uuid
    return Send("update", _isvc(namespace, name), UPDATE_MIGRATE, request)


def drain_node(node: str, reason: str = "", timeout: str | None = None, task_queue: str = TASK_QUEUE) -> Send:
    payload: dict[str, Any] = {"node": node}
    if reason:
        payload["reason"] = reason
    if timeout:
        payload["timeout"] = timeout
    return Send("start", drain_workflow_id(node), DRAIN, payload, task_queue=task_queue)


def undrain_node(node: str, cancel: bool = False) -> Send:
    """`release` uncordons a drained node; `cancel` stops a drain still moving, and uncordons."""
    return Send("signal", drain_workflow_id(node), SIGNAL_CANCEL if cancel else SIGNAL_RELEASE)


def drain_cluster(namespace: str, name: str, cluster: str, override_id: str, reason: str = "") -> Send:
    return Send(
        "update", trafficmap_workflow_id(namespace, name), DRAIN_CLUSTER, {"id": override_id, "cluster": cluster, "reason": reason}
    )


def undrain_cluster(namespace: str, name: str, override_id: str) -> Send:
    return Send("update", trafficmap_workflow_id(namespace, name), UNDRAIN_CLUSTER, {"id": override_id})

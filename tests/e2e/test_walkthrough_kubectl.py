"""The kubectl way in (issue 15) on the running stack, as a user drives it.

- the README's "Driving it with `kubectl`" section, command by command, exactly as written;
- every manifest under deploy/examples/invalid/ refused by the webhook with its reason, nothing
  stored;
- both ways in on one service, in both orders: the last spec applied, once;
- the webhook down: `failurePolicy: Fail` refuses writes, `Ignore` lets a bad spec through to
  the controller, whose `apply` Update refuses it (Warning Event `SpecRejected`).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.running_stack import REPO_ROOT, RunningStack
from tests.e2e.test_walkthrough import README, output_of, run_walkthrough, walkthrough_commands

INVALID = REPO_ROOT / "deploy" / "examples" / "invalid"
WEBHOOK = "inferenceservice.ome-webhook-server.validator"
CONFIGURATION = "ome-validating-webhook-configuration"


def kubectl(
    stack: RunningStack, *args: str, check: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(stack.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
        input=stdin,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"kubectl {' '.join(args)} exited {result.returncode}:\n{result.stderr}\n{result.stdout}"
        )
    return result


def kubectl_json(stack: RunningStack, *args: str) -> Any:
    return json.loads(kubectl(stack, *args, "-o", "json").stdout)


def until(probe: Any, what: str, within: float = 60.0) -> Any:
    deadline = time.monotonic() + within
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:.0f} s: {what}")
        time.sleep(0.3)


QUERY_BUSY = "consistent query buffer is full"
"""The server's refusal of a query that arrives while the workflow's task runs and another query
already waits for that task: a moment later it is answered."""


def query(stack: RunningStack, workflow_id: str, name: str) -> Any:
    """`temporal workflow query`'s answer; asked again, as a user would, while the server refuses
    it as busy (the controller may be querying the same workflow)."""
    args = ("workflow", "query", "--workflow-id", workflow_id, "--name", name, "--output", "json")
    for _ in range(50):
        result = stack.temporal(*args, check=False)
        if result.returncode == 0:
            return json.loads(result.stdout)["queryResult"][0]
        if QUERY_BUSY not in result.stderr:
            break
        time.sleep(0.2)
    raise AssertionError(f"`temporal {' '.join(args)}` exited {result.returncode}\nstderr:\n{result.stderr}")


def ensure_namespace(stack: RunningStack, name: str) -> None:
    manifest = yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    kubectl(stack, "apply", "-f", "-", stdin=manifest)


@pytest.mark.timeout(300)
def test_readme_kubectl_section_runs_as_written(stack: RunningStack, tmp_path: Path) -> None:
    commands = walkthrough_commands(README.read_text(), heading="Driving it with `kubectl`")
    assert len(commands) >= 14, f"the section lost its commands: {commands}"
    outputs, stderr = run_walkthrough(stack, tmp_path, commands)

    applied = output_of(
        commands, outputs, "temporal workflow query --workflow-id isvc/kubectl-demo/qwen3-chat --name applied"
    )
    assert re.search(r"object_generation\W+1\b", applied), applied
    assert f'admission webhook "{WEBHOOK}" denied the request: ' in stderr, stderr
    assert "(InvalidReplicas)" in stderr, stderr
    paused = output_of(
        commands, outputs, "temporal workflow query --workflow-id isvc/kubectl-demo/qwen3-chat --name status"
    )
    resumed = output_of(
        commands,
        outputs,
        "temporal workflow query --workflow-id isvc/kubectl-demo/qwen3-chat --name status",
        nth=1,
    )
    assert '"pause": "freeze"' in paused, paused
    assert '"pause": null' in resumed, resumed
    gone = output_of(
        commands, outputs, "kubectl get pods,inferencereplicas,inferenceservices -n kubectl-demo"
    )
    assert gone == "" and stderr.rstrip().endswith("No resources found in kubectl-demo namespace."), stderr
    # The workflow completed: the object went only after everything was drained and removed.
    described = stack.temporal_json("workflow", "describe", "--workflow-id", "isvc/kubectl-demo/qwen3-chat")
    assert described["workflowExecutionInfo"]["status"] == "WORKFLOW_EXECUTION_STATUS_COMPLETED", described


def test_every_invalid_example_is_refused_by_the_webhook_and_nothing_is_stored(stack: RunningStack) -> None:
    ensure_namespace(stack, "invalid-demo")
    kubectl(stack, "apply", "-f", "deploy/examples/srt-qwen3-0-6b.yaml")
    table = (INVALID / "README.md").read_text()
    files = sorted(INVALID.glob("*.yaml"))
    assert len(files) >= 20
    reasons = set()
    for path in files:
        row = re.search(rf"^\| `{re.escape(path.name)}` \| `?(\w+)`? \|", table, re.MULTILINE)
        assert row is not None, f"{path.name} is not in the invalid README's table"
        reason = row.group(1)
        reasons.add(reason)
        result = kubectl(stack, "apply", "-f", str(path.relative_to(REPO_ROOT)), check=False)
        assert result.returncode == 1, (path.name, result.stdout, result.stderr)
        assert f'admission webhook "{WEBHOOK}" denied the request: ' in result.stderr, (
            path.name,
            result.stderr,
        )
        assert f"({reason})" in result.stderr, (path.name, reason, result.stderr)
    assert len(reasons) >= 20, reasons
    listed = kubectl_json(stack, "get", "inferenceservices", "-n", "invalid-demo")
    assert listed["items"] == [], "a refused manifest was stored"


def apply_both_ways(stack: RunningStack, tmp_path: Path, name: str, order: tuple[str, str]) -> None:
    """Apply two specs of `name`, one each way in `order`, waiting for each to be taken; then
    check the object and the workflow end on the last one, applied exactly once each."""
    base = yaml.safe_load((REPO_ROOT / "deploy/examples/qwen3-chat.yaml").read_text())
    base["metadata"].update(name=name, namespace="both-ways")
    base["spec"]["engine"].update(minReplicas=1, maxReplicas=1)
    workflow_id = f"isvc/both-ways/{name}"

    def generation() -> int:
        try:
            return int(query(stack, workflow_id, "applied")["generation"])
        except AssertionError:  # not started yet
            return 0

    specs = []
    for step, way in enumerate(order):
        spec = json.loads(json.dumps(base))
        spec["spec"]["engine"]["runner"] = {"image": f"docker.io/lmsysorg/sglang:v0.5.{step}"}
        specs.append(spec)
        path = tmp_path / f"{name}-{step}.json"
        path.write_text(json.dumps(spec))
        if way == "temporal":
            stack.temporal(
                "workflow", "execute-update-with-start", "--update-name", "apply",
                "--update-input-file", str(path), "--type", "InferenceService",
                "--task-queue", "ome-lifecycle", "--workflow-id", workflow_id,
                "--id-conflict-policy", "UseExisting", "--input-file", str(path),
            )  # fmt: skip
        else:
            kubectl(stack, "apply", "-f", str(path))
        until(
            lambda want=step + 1: generation() == want, f"{name}: generation {step + 1} after the {way} apply"
        )

    def settled() -> Any:
        obj = kubectl_json(stack, "get", "inferenceservice", name, "-n", "both-ways")
        view = query(stack, workflow_id, "applied")
        observed = (obj.get("status") or {}).get("observedGeneration")
        return (obj, view) if observed == obj["metadata"]["generation"] == view["object_generation"] else None

    obj, view = until(settled, f"{name}: the object's generation observed")
    assert obj["spec"] == specs[-1]["spec"], f"{name} ended on another spec: {obj['spec']}"
    assert view["generation"] == 2, f"{name}: applied {view['generation']} times, not 2: {view}"
    time.sleep(2)  # a late relay would show up as a third generation
    assert generation() == 2
    stack.temporal("workflow", "signal", "--workflow-id", workflow_id, "--name", "delete")
    until(
        lambda: (
            kubectl(stack, "get", "inferenceservice", name, "-n", "both-ways", check=False).returncode == 1
        ),
        f"{name} deleted",
        within=120,
    )


def test_both_ways_in_end_on_the_last_spec_applied_once(stack: RunningStack, tmp_path: Path) -> None:
    ensure_namespace(stack, "both-ways")
    kubectl(stack, "apply", "-f", "deploy/examples/srt-qwen3-0-6b.yaml")
    apply_both_ways(stack, tmp_path, "temporal-first", ("temporal", "kubectl"))
    apply_both_ways(stack, tmp_path, "kubectl-first", ("kubectl", "temporal"))


def test_with_the_webhook_down_fail_refuses_and_ignore_reaches_the_controller(stack: RunningStack) -> None:
    ensure_namespace(stack, "webhook-down")
    kubectl(stack, "apply", "-f", "deploy/examples/srt-qwen3-0-6b.yaml")
    configuration = kubectl_json(stack, "get", "validatingwebhookconfiguration", CONFIGURATION)
    url = configuration["webhooks"][0]["clientConfig"]["url"]
    dead = re.sub(r":\d+/", ":1/", url)  # nothing listens on port 1: the API server cannot reach it
    bad = yaml.safe_load((INVALID / "invalid-replicas.yaml").read_text())
    bad["metadata"]["namespace"] = "webhook-down"

    def point(policy: str, to: str) -> None:
        patch = [
            {"op": "replace", "path": "/webhooks/0/clientConfig/url", "value": to},
            {"op": "replace", "path": "/webhooks/0/failurePolicy", "value": policy},
        ]
        kubectl(
            stack,
            "patch",
            "validatingwebhookconfiguration",
            CONFIGURATION,
            "--type",
            "json",
            "-p",
            json.dumps(patch),
        )

    try:
        point("Fail", dead)
        refused = kubectl(stack, "apply", "-f", "-", check=False, stdin=yaml.safe_dump(bad))
        assert refused.returncode == 1, refused.stdout
        assert f'failed calling webhook "{WEBHOOK}"' in refused.stderr, refused.stderr
        assert (
            kubectl(
                stack, "get", "inferenceservice", bad["metadata"]["name"], "-n", "webhook-down", check=False
            ).returncode
            == 1
        )

        point("Ignore", dead)
        kubectl(stack, "apply", "-f", "-", stdin=yaml.safe_dump(bad))

        def rejected() -> Any:
            events = kubectl_json(
                stack, "get", "events", "-n", "webhook-down", "--field-selector", "reason=SpecRejected"
            )
            return events["items"]

        (event, *_) = until(rejected, "the controller's SpecRejected Warning Event")
        assert event["type"] == "Warning" and "(InvalidReplicas)" in event["message"], event
        assert event["involvedObject"]["name"] == bad["metadata"]["name"]
    finally:
        point(configuration["webhooks"][0].get("failurePolicy", "Fail"), url)
        kubectl(
            stack,
            "delete",
            "inferenceservice",
            bad["metadata"]["name"],
            "-n",
            "webhook-down",
            "--ignore-not-found",
            "--timeout=60s",
            check=False,
        )

"""`omectl rollout status`'s view: the InferenceService's answers to its queries as a Rich tree,
service > components > Instances > pods (no I/O: `rollout_reads` fetches the answers).

The answers are the workflows' own: the InferenceService's `status` (lifecycle totals,
revisions, `rolloutHold`, the canary's phase, step, traffic and last analysis samples) and
`rollout_status` (a row per group and component, spec reference §3.4), and each
InferenceReplica's `status` (a row per Instance with its pods). Nothing is guessed from
Kubernetes objects.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from models.inferencereplica import InferenceReplicaStatus, InstanceRow
from models.isvc_status import ComponentStatus, MetricResult
from workflows.rollout.messages import RolloutRow
from workflows.service.messages import RolloutStatusView, ServiceStatusView

PIPED_WIDTH = 200
"""A pipe has no width: lines are kept whole up to this many characters (for `grep`, and frames)."""

SAMPLES_SHOWN = 3
"""The last analysis samples shown per component: enough to see a trend, short enough to read."""


@dataclass(frozen=True)
class StatusSnapshot:
    """One reading of a service: what each query answered at one moment."""

    service: ServiceStatusView
    rollout: RolloutStatusView
    replicas: dict[str, InferenceReplicaStatus] = field(default_factory=dict)
    """Component -> its InferenceReplica's `status` (OMENative components only)."""
    unread: frozenset[str] = frozenset()
    """OMENative components whose InferenceReplica did not answer (not started yet, or busy)."""

    def to_json(self) -> dict[str, Any]:
        """`-o json`: the answers as the `temporal` CLI would print them, in one document."""
        return {
            "service": self.service.model_dump(mode="json", by_alias=True),
            "rollout": self.rollout.model_dump(mode="json"),
            "replicas": {name: status.to_manifest() for name, status in self.replicas.items()},
        }


def status_tree(snapshot: StatusSnapshot) -> Tree:
    """The whole tree: one branch per component, in the order the service lists them."""
    tree = Tree(service_line(snapshot))
    rows = {row.component: row for row in snapshot.rollout.rows}
    components = list(snapshot.service.status.components)
    components += [name for name in snapshot.replicas if name not in components]
    for name in components:
        component = snapshot.service.status.components.get(name, ComponentStatus())
        component_branch(tree, name, component, rows.get(name), snapshot.replicas.get(name))
    if not components:
        tree.add(Text("no components yet", style="dim"))
    return tree


def service_line(snapshot: StatusSnapshot) -> Text:
    view, rollout = snapshot.service, snapshot.rollout
    line = Text()
    line.append(view.name, style="bold").append(f" ({view.namespace})")
    line.append(f"  generation {view.generation}  phase ").append(view.phase, style=phase_style(view.phase))
    ready = view.status.condition("Ready")
    if ready is not None:
        line.append(f"  Ready {ready.status}")
    if rollout.run is not None:
        state = "active" if rollout.active else (rollout.outcome or "closed")
        line.append(f"  run {rollout.run} ({state})")
    line.append("  rollout ").append(rollout.reported, style=phase_style(rollout.reported))
    if rollout.parked_reason:
        line.append(f"  parked: {rollout.parked_reason}", style="yellow")
    if view.pause:
        line.append(f"  paused ({view.pause})", style="yellow")
    if view.deleting:
        line.append("  deleting", style="red")
    return line


def component_branch(
    tree: Tree,
    name: str,
    component: ComponentStatus,
    row: RolloutRow | None,
    replica: InferenceReplicaStatus | None,
) -> None:
    branch = tree.add(component_line(name, component, row))
    lifecycle = component.lifecycle
    current = (replica.current_revision if replica else None) or (lifecycle.current_revision if lifecycle else None)
    update = (replica.update_revision if replica else None) or (lifecycle.update_revision if lifecycle else None)
    if current or update:
        shown = Text("revisions  current ").append(current or "-", style="cyan")
        shown.append("  update ").append(update or "-", style="magenta" if update != current else "cyan")
        branch.add(shown)
    hold = (replica.rollout_hold if replica else None) or (lifecycle.rollout_hold if lifecycle else None)
    gate, reason = (row.gate, row.reason) if row is not None and row.gate else (
        (hold.gate, hold.reason) if hold is not None else (None, None)
    )
    if gate:
        held = Text("gate ").append(gate, style="yellow").append(f": {reason or ''}")
        if row is not None and row.release:
            held.append(f"  (released by {row.release})", style="dim")
        branch.add(held)
    if component.canary is not None and component.canary.metric_results:
        samples = branch.add(f"analysis  failed checks {component.canary.analysis_failed_checks}")
        for result in component.canary.metric_results[-SAMPLES_SHOWN:]:
            samples.add(sample_line(result))
    if replica is not None:
        instances_branch(branch, replica, update)


def component_line(name: str, component: ComponentStatus, row: RolloutRow | None) -> Text:
    line = Text(name, style="bold")
    lifecycle = component.lifecycle
    if row is not None:
        line.append(f"  {row.strategy} group {row.group} ").append(row.group_phase, style=phase_style(row.group_phase))
    phase = (row.phase if row is not None else None) or component.rollout_phase
    if phase:
        line.append("  phase ").append(phase, style=phase_style(phase))
    if row is not None and row.step:
        line.append(f"  step {row.step}")
    if row is not None and row.traffic:
        line.append(f"  traffic {row.traffic}")
    elif component.traffic:
        line.append("  traffic " + ", ".join(f"{t.revision_name}={t.percent}%" for t in component.traffic))
    if lifecycle is not None:
        line.append(
            f"  {lifecycle.updated_replicas}/{lifecycle.replicas} updated, "
            f"{lifecycle.serving_replicas} serving"
        )
    elif component.deployment_mode:
        line.append(f"  {component.deployment_mode}", style="dim")
    if row is not None and row.issues:
        line.append("  issues " + ",".join(row.issues), style="red")
    return line


def sample_line(result: MetricResult) -> Text:
    verdict = "Pass" if result.passed else ("Inconclusive" if not result.value else "Fail")
    line = Text(f"{result.name} {result.value or '-'} {result.operator or ''} {result.threshold} ")
    line.append(verdict, style={"Pass": "green", "Fail": "red"}.get(verdict, "yellow"))
    if result.message:
        line.append(f" ({result.message})", style="dim")
    if result.time is not None:
        line.append(f"  {result.time:%H:%M:%S}", style="dim")
    return line


def instances_branch(branch: Tree, replica: InferenceReplicaStatus, update: str | None) -> None:
    title = (
        f"Instances  {replica.updated_replicas}/{replica.replicas} on update revision, "
        f"{replica.ready_replicas} ready, {replica.serving_replicas} serving"
    )
    instances = branch.add(title)
    for row in sorted(replica.instance_statuses, key=lambda r: r.index):
        instance = instances.add(instance_line(row, update))
        instance.add(pods_line(row))
    for block in replica.retry_blocks:
        instances.add(Text(f"retry block {block.target_revision}: {block.state} {block.reason}", style="red"))


def instance_line(row: InstanceRow, update: str | None) -> Text:
    line = Text(f"#{row.index}  ").append(row.phase, style=phase_style(row.phase))
    running = row.running_revision or "-"
    on_update = same_revision(row.running_revision, update)
    line.append("  ").append(running, style="magenta" if on_update else "cyan")
    if row.target_revision and not same_revision(row.target_revision, row.running_revision):
        line.append(" -> ").append(row.target_revision, style="magenta")
    if row.incarnation > 1:
        line.append(f"  incarnation {row.incarnation}", style="dim")
    if row.operation is not None:
        line.append(f"  {row.operation.type} {row.operation.step or ''}".rstrip())
        if row.operation.waiting:
            line.append(f" waiting {row.operation.waiting}", style="yellow")
    if row.last_failure is not None:
        line.append(f"  last failure {row.last_failure.reason}", style="red")
    return line


def pods_line(row: InstanceRow) -> Text:
    pods = row.pods
    line = Text(f"pods {pods.ready}/{pods.total} ready, {pods.serving} serving")
    if row.node_names:
        line.append("  on " + ", ".join(row.node_names), style="dim")
    return line


def phase_style(phase: str | None) -> str:
    if phase in ("Ready", "Stable", "Succeeded", "Completed", "True"):
        return "green"
    if phase in ("Failed", "RolledBack", "RollingBack", "Held"):
        return "red"
    return "yellow"


def same_revision(one: str | None, other: str | None) -> bool:
    """Whether two revisions are one: Instance rows name a revision by its hash, the
    InferenceReplica's totals by its name, `{isvc}-{component}-rev-{hash}`."""
    if one is None or other is None:
        return False
    return one.rsplit("-rev-", 1)[-1] == other.rsplit("-rev-", 1)[-1]


def show(console: Console, renderable: Any) -> None:
    """Print to a terminal at its width; to a pipe as plain lines up to `PIPED_WIDTH`."""
    if console.is_terminal:
        console.print(renderable)
    else:
        console.print(Text(render_text(renderable).rstrip("\n")), highlight=False, soft_wrap=True)


def render_text(renderable: Any, width: int = PIPED_WIDTH) -> str:
    """`renderable` as plain text: what a pipe receives, and what a frame is compared by."""
    written = io.StringIO()
    Console(width=width, color_system=None, force_terminal=False, file=written).print(renderable)
    return "".join(line.rstrip() + "\n" for line in written.getvalue().splitlines())

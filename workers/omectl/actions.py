"""The action verbs: each sends the Update (or, where only a signal exists, the signal) the
README's `temporal` way sends, prints the answer and the equivalent `temporal` command, and
exits 0 done, 1 refused (the workflow's refusal text), 3 conflict. `--dry-run` prints the
workflow, message, JSON input and `temporal` command, and sends nothing.

Grammar: `omectl VERB ISVC [ARGS] [-n NS]` steers an InferenceService; `omectl drain node NODE`
/ `omectl undrain node NODE` a node's `Drain` workflow; `omectl drain cluster ISVC
--workload-cluster WLC --id ID` / `omectl undrain cluster ISVC --id ID` a TrafficMap override."""

from __future__ import annotations

from typing import Any

import typer

from workers.omectl import guards, plans
from workers.omectl.guards import Guard
from workers.omectl.plans import Send
from workers.omectl.sending import perform
from workers.omectl.session import client, option_namespace, run, settings

DRY_RUN_HELP = "Print what would be sent (workflow, message, JSON input, temporal command); send nothing."


def dry_run_option() -> Any:
    return typer.Option(False, "--dry-run", help=DRY_RUN_HELP)


def go(send: Send, dry_run: bool, guard: Guard | None = None) -> None:
    async def body() -> None:
        await perform(client, send, dry_run, guard)

    run(body)


def register(app: typer.Typer) -> None:
    """Add every action verb to `app`."""

    @app.command()
    def promote(
        isvc: str = typer.Argument(..., help="The InferenceService."),
        revision: str | None = typer.Option(None, help="The canary revision hash the promote is meant for."),
        override_analysis: bool = typer.Option(False, "--override-analysis", help="Pass an Analysis gate."),
        namespace: str = option_namespace(),
        dry_run: bool = dry_run_option(),
    ) -> None:
        """Advance a canary past its manual gate (Update `promote`).

        \b
        Example:
          omectl promote mistral-pd -n canary-demo
          omectl promote mistral-pd -n canary-demo --override-analysis
        """
        go(plans.promote(namespace, isvc, revision, override_analysis), dry_run)

    @app.command()
    def rollback(
        isvc: str = typer.Argument(..., help="The InferenceService."),
        revision: str | None = typer.Option(None, help="The canary revision hash to roll back."),
        namespace: str = option_namespace(),
        dry_run: bool = dry_run_option(),
    ) -> None:
        """Abort a canary to each component's stable revision (Update `rollback`).

        \b
        Example:
          omectl rollback mistral-pd -n canary-demo
        """
        go(plans.rollback(namespace, isvc, revision), dry_run)

    @app.command()
    def retry(
        isvc: str = typer.Argument(..., help="The InferenceService."),
        revision: str = typer.Argument(..., help="`engine=<hash>` or `<hash>` of the Failed or RolledBack canary."),
        namespace: str = option_namespace(),
        dry_run: bool = dry_run_option(),
    ) -> None:
        """Resume a Failed or RolledBack canary from step 1 (Update `retry`).

        \b
        Example:
          omectl retry mistral-pd engine=5d9c7b8f -n canary-demo
        """
        go(plans.retry(namespace, isvc, revision), dry_run)

    @app.command()
    def repin(
        isvc: str = typer.Argument(..., help="The InferenceService."),
        digest: str = typer.Option("now", help="The live plan digest `rp1:<12 hex>`, or `now` to skip the check."),
        namespace: str = option_namespace(),
        dry_run: bool = dry_run_option(),
    ) -> None:
        """Pin the edited spec.rollout onto the active run (Update `repin`).

        \b
        Example:
          omectl repin mistral-pd --digest rp1:cca45ec1fb0f -n canary-demo
        """
        go(plans.repin(namespace, isvc, digest), dry_run)

    @app.command()
    def pause(
        isvc: str = typer.Argument(..., help="The InferenceService."),
        freeze: bool = typer.Option(False, "--freeze", help="Also stop repairs (OME's `freeze`)."),
        discard_pending_actions: bool = typer.Option(
            False, "--discard-pending-actions", help="Also drop pending promote and rollback requests."
        ),
        namespace: str = option_namespace(),
        dry_run: bool = dry_run_option(),
    ) -> None:
        """Hold updates, new Instances and spec changes (signal `pause`). Reads the service
        first: already paused at that depth, or frozen, is refused (exit 1, nothing sent).

        \b
        Example:
          omectl pause qwen3-0-6b -n spread-demo
          omectl pause qwen3-0-6b -n spread-demo --freeze
        """
        go(plans.pause(namespace, isvc, freeze, discard_pending_actions), dry_run, guards.pause(namespace, isvc, freeze))

    @app.command()
    def resume(
        isvc: str = typer.Argument(..., help="The InferenceService."),
        namespace: str = option_namespace(),
        dry_run: bool = dry_run_option(),
    ) -> None:
        """Lift a pause of either depth (signal `resume`); refused without a pause (exit 1).

        \b
        Example:
          omectl resume qwen3-0-6b -n spread-demo
        """
        go(plans.resume(namespace, isvc), dry_run, guards.resume(namespace, isvc))

    @app.command("release-held")
    def release_held(
        isvc: str = typer.Argument(..., help="The InferenceService."),
        component: str = typer.Argument(..., help="engine, decoder or router."),
        revision: str = typer.Argument(..., help="The held revision: its name, hash or 8-hex prefix."),
        namespace: str = option_namespace(),
        dry_run: bool = dry_run_option(),
    ) -> None:
        """Release a Held retry block (signal `release_held`; see `omectl get retry-blocks`);
        refused (exit 1, nothing sent) when the InferenceReplica has no Held block for it.

        \b
        Example:
          omectl release-held qwen3-0-6b engine qwen3-0-6b-engine-rev-5d9c7b8f -n spread-demo
        """
        go(
            plans.release_held(namespace, isvc, component, revision),
            dry_run,
            guards.release_held(namespace, isvc, component, revision),
        )

    @app.command()
    def reset(
        isvc: str = typer.Argument(..., help="The InferenceService."),
        component: str = typer.Argument(..., help="engine, decoder or router."),
        instances: str = typer.Option("all", help="`all`, an index, or a comma list (`0,2`)."),
        namespace: str = option_namespace(),
        dry_run: bool = dry_run_option(),
    ) -> None:
        """Reset failed Instances: delete their pods, clear their operation (signal `reset_instances`).

        \b
        Example:
          omectl reset qwen3-0-6b engine --instances 0,2 -n spread-demo
        """
        go(plans.reset(namespace, isvc, component, instances), dry_run)

    @app.command()
    def migrate(
        isvc: str = typer.Argument(..., help="The InferenceService."),
        component: str = typer.Argument(..., help="engine, decoder or router."),
        instance: int = typer.Argument(..., help="The Instance's index."),
        from_node: str = typer.Option(..., "--from-node", help="The node it runs on now."),
        reason: str = typer.Option("", help="Why (kept in the audit ConfigMap)."),
        hint_target_node: list[str] = typer.Option([], "--hint-target-node", help="A node to prefer (up to 8)."),
        uuid: str | None = typer.Option(None, help="The request's uuid (default: the workflow picks one)."),
        namespace: str = option_namespace(),
        dry_run: bool = dry_run_option(),
    ) -> None:
        """Move one Instance off its node, replacement first (Update `migrate`).

        \b
        Example:
          omectl migrate qwen3-0-6b engine 0 --from-node gpu-node-1 --reason "ECC errors" -n fleet-demo
        """
        go(plans.migrate(namespace, isvc, component, instance, from_node, reason, hint_target_node, uuid), dry_run)

    drain = typer.Typer(help="Drain a node (its Drain workflow) or a workload cluster (a TrafficMap override).")
    undrain = typer.Typer(help="Release a drained node, or remove a workload cluster's TrafficMap override.")
    app.add_typer(drain, name="drain")
    app.add_typer(undrain, name="undrain")

    @drain.command("node")
    def drain_node(
        node: str = typer.Argument(..., help="The node."),
        reason: str = typer.Option("", help="Why (shown in the drain's status)."),
        timeout: str | None = typer.Option(None, help="After this (`2h`) nothing more moves."),
        dry_run: bool = dry_run_option(),
    ) -> None:
        """Cordon a node and move every Instance off it, replacement first (starts workflow
        `drain/node/NODE`); it stays cordoned until `omectl undrain node`. Exit 3 if one runs.

        \b
        Example:
          omectl drain node gpu-node-1 --reason "kernel upgrade" --timeout 2h
        """
        go(plans.drain_node(node, reason, timeout, settings().temporal.task_queue), dry_run)

    @undrain.command("node")
    def undrain_node(
        node: str = typer.Argument(..., help="The node."),
        cancel: bool = typer.Option(False, "--cancel", help="Stop a drain still moving (signal `cancel`)."),
        dry_run: bool = dry_run_option(),
    ) -> None:
        """Uncordon a drained node and end its drain (signal `release`).

        \b
        Example:
          omectl undrain node gpu-node-1
        """
        go(plans.undrain_node(node, cancel), dry_run)

    @drain.command("cluster")
    def drain_cluster(
        isvc: str = typer.Argument(..., help="The multi-cluster InferenceService."),
        workload_cluster: str = typer.Option(..., "--workload-cluster", help="The WorkloadCluster to hold at weight 0."),
        override_id: str = typer.Option(..., "--id", help="Override ID (lowercase letters, digits, hyphens)."),
        reason: str = typer.Option("", help="Why."),
        namespace: str = option_namespace(),
        dry_run: bool = dry_run_option(),
    ) -> None:
        """Hold a workload cluster's traffic at 0 (TrafficMap Update `drain_cluster`).

        \b
        Example:
          omectl drain cluster chat --workload-cluster worker-b --id upgrade-42 --reason "node pool upgrade" -n prod
        """
        go(plans.drain_cluster(namespace, isvc, workload_cluster, override_id, reason), dry_run)

    @undrain.command("cluster")
    def undrain_cluster(
        isvc: str = typer.Argument(..., help="The multi-cluster InferenceService."),
        override_id: str = typer.Option(..., "--id", help="The override ID the drain used."),
        namespace: str = option_namespace(),
        dry_run: bool = dry_run_option(),
    ) -> None:
        """Remove a workload cluster override (TrafficMap Update `undrain_cluster`).

        \b
        Example:
          omectl undrain cluster chat --id upgrade-42 -n prod
        """
        go(plans.undrain_cluster(namespace, isvc, override_id), dry_run)

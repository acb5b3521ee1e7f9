"""Sending a planned message (`workers.omectl.plans.Send`) and turning the workflow's answer
into omectl's output and exit code: 0 done, 1 refused (the workflow's refusal text, verbatim),
3 conflict (a drain already running on the node, or a refusal whose `ApplicationError.type` the
reference calls a conflict: `migrate`'s state refusals, §3.3 and §13)."""

from __future__ import annotations

import json
import shlex
from typing import Any

from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from workers.config import TemporalSettings
from workers.omectl import session
from workers.omectl.guards import Guard
from workers.omectl.plans import Send, temporal_command
from workers.omectl.session import EXIT_CONFLICT, EXIT_REFUSED, CommandFailed, settings, stderr, stdout
from workflows.service.messages import MIGRATION_CONFLICT

MIGRATION_CONFLICT_TEXT = "migration precondition conflicts or is stale; inspect migration status and retry explicitly"
CONFLICTS = {MIGRATION_CONFLICT: MIGRATION_CONFLICT_TEXT}
"""Refusal types that exit 3 (conflict), not 1, and the reference's CLI text printed after the
workflow's own reason (§13 `migration start`)."""


def refusal_text(error: WorkflowUpdateFailedError) -> str:
    cause = error.cause
    if isinstance(cause, ApplicationError):
        return cause.message
    return str(getattr(cause, "message", None) or cause or error)


def refusal_type(error: WorkflowUpdateFailedError) -> str | None:
    cause = error.cause
    return cause.type if isinstance(cause, ApplicationError) else None


def refused(error: WorkflowUpdateFailedError) -> CommandFailed:
    """The workflow's reason verbatim, exit 1; a conflict's also its CLI text, exit 3."""
    message = refusal_text(error)
    conflict = CONFLICTS.get(refusal_type(error) or "")
    if conflict is not None:
        return CommandFailed(f"{message}\n{conflict}", EXIT_CONFLICT)
    return CommandFailed(message, EXIT_REFUSED)


def shown(answer: Any) -> str:
    """A string answer verbatim; `{"rows": [...]}` (a traffic drain) as its rows; else JSON."""
    if isinstance(answer, str):
        return answer
    if isinstance(answer, dict) and isinstance(answer.get("rows"), list):
        return "\n".join(
            f"override-id={row.get('override_id')} cluster={row.get('cluster')} overrides={row.get('overrides')}"
            for row in answer["rows"]
        )
    return json.dumps(answer)


API_KEY_REFERENCE = '"$OME_TEMPORAL__API_KEY"'
"""What the printed line passes as `--api-key`: the variable, for the shell to expand; never the key."""


def connection_flags(temporal: TemporalSettings) -> str:
    """The `temporal` CLI's TLS and API-key flags for what `OME_TEMPORAL__*` sets (`temporal
    options`), so the printed line reaches the same server the same way."""
    words: list[str] = []
    if temporal.uses_tls:
        words.append("--tls")
    for flag, value in (
        ("--tls-cert-path", temporal.tls_cert),
        ("--tls-key-path", temporal.tls_key),
        ("--tls-ca-path", temporal.tls_ca),
        ("--tls-server-name", temporal.tls_server_name),
    ):
        if value is not None:
            words += [flag, str(value)]
    shown = shlex.join(words)
    if temporal.api_key is not None:
        shown = f"{shown} --api-key {API_KEY_REFERENCE}".strip()
    return shown


def command_line(send: Send) -> str:
    temporal = settings().temporal
    line = temporal_command(send, temporal.address, temporal.namespace)
    flags = connection_flags(temporal)
    return f"{line} {flags}" if flags else line


def print_dry_run(send: Send) -> None:
    stdout.print(f"dry run: nothing sent\nworkflow: {send.workflow_id}", markup=False)
    stdout.print(f"{send.kind}: {send.name}", markup=False)
    stdout.print(f"input: {'none' if send.input is None else json.dumps(send.input)}", markup=False)
    stdout.print(f"temporal: {command_line(send)}", markup=False)


async def deliver(temporal: Client, send: Send) -> Any:
    """Send it; the answer of an Update, None for a signal or a start. Each call's deadline is
    the budget's (`perform` bounds the whole)."""
    handle = temporal.get_workflow_handle(send.workflow_id)
    deadline = session.rpc_timeout()
    args = [] if send.input is None else [send.input]
    try:
        if send.kind == "update":
            return await handle.execute_update(send.name, args=args, rpc_timeout=deadline)
        if send.kind == "signal":
            await handle.signal(send.name, args=args, rpc_timeout=deadline)
            return None
        await temporal.start_workflow(
            send.name, send.input, id=send.workflow_id, task_queue=send.task_queue, rpc_timeout=deadline
        )
        return None
    except WorkflowUpdateFailedError as error:
        raise refused(error) from error
    except WorkflowAlreadyStartedError as error:
        raise CommandFailed(f"{send.workflow_id} is already running: {send.name} not started again", EXIT_CONFLICT) from error
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise CommandFailed(f"no running workflow {send.workflow_id}: {error.message}") from error
        raise


def verb_of(send: Send) -> str:
    return send.name.lower().replace("_", "-")


def follow_up(send: Send) -> str:
    """Where to see what happened: the service's rollout status, else the workflow itself."""
    if send.workflow_id.startswith("isvc/"):
        _, namespace, name = send.workflow_id.split("/", 2)
        return f"check omectl rollout status {name} -n {namespace}"
    return f"check temporal workflow describe --workflow-id {send.workflow_id}"


def unknown_outcome(send: Send, sent: bool) -> str:
    """What a run-out budget means: before sending, nothing was sent; after, the outcome is unknown."""
    seconds = f"{session.budget():g}s"
    if not sent:
        return f"{verb_of(send)} not sent: no answer from {send.workflow_id} within {seconds} (is a worker polling?)"
    return (
        f"{verb_of(send)} request outcome unknown after {seconds} ({send.kind} {send.name} to {send.workflow_id}); "
        f"do not replay, {follow_up(send)}"
    )


async def perform(temporal_client: Any, send: Send, dry_run: bool, guard: Guard | None = None) -> None:
    """The whole verb: a dry run prints what would go (reading nothing); otherwise read and
    refuse what the workflow would refuse (`guard`, for signals, which have no answer), send,
    print the answer, and the `temporal` command that does the same (on stderr, so stdout is
    the answer alone)."""
    if dry_run:
        print_dry_run(send)
        return
    sending = False

    async def body() -> Any:
        nonlocal sending
        temporal = await temporal_client()
        if guard is not None:
            await guard(temporal)
        sending = True
        try:
            return await deliver(temporal, send)
        finally:
            stderr.print(f"temporal: {command_line(send)}", markup=False)

    answer = await session.within_budget(body, lambda: unknown_outcome(send, sending))
    if send.kind == "update":
        stdout.print(shown(answer), markup=False)
    elif send.kind == "signal":
        stdout.print(f"signal {send.name} sent to {send.workflow_id}", markup=False)
    else:
        stdout.print(f"started {send.name} {send.workflow_id}", markup=False)

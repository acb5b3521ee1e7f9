"""The `omectl` command line (console script `omectl`): the Typer app and `main()`.

`apply` and `get` read and write through the workflows (`workers.omectl.apply`,
`workers.omectl.get`); the action verbs send their Updates and signals
(`workers.omectl.actions`); `rollout` (status, explain, history) comes from
`workers.omectl.rollout`. Every command has `--help` with an example."""

from __future__ import annotations

import typer

from workers.omectl import actions, rollout
from workers.omectl.apply import apply
from workers.omectl.get import get
from workers.omectl.session import finish

app = typer.Typer(
    name="omectl",
    help=(
        "Operate omeflow's InferenceServices: a thin client over the workflows' Updates, signals "
        "and queries (the `temporal` CLI does the same; each action prints its `temporal` line).\n\n"
        "Reads OME_TEMPORAL__* like the worker (address, namespace, TLS, API key).\n\n"
        "\b\nExample:\n  omectl apply -f deploy/examples/qwen3-chat.yaml --wait\n  omectl get irep -n kubectl-demo"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("apply", help=apply.__doc__)(apply)
app.command("get", help=get.__doc__)(get)
actions.register(app)

app.add_typer(rollout.app, name="rollout")


def main() -> None:
    """Run omectl and end the process with its exit code (see `session.finish`)."""
    try:
        app()
    except SystemExit as exiting:
        code = exiting.code
        finish(code if isinstance(code, int) else (0 if code is None else 1))
    finish(0)

"""The lifecycle bench's command line (`python -m bench.lifecycle_bench --help`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def positive_counts(flag: str, example: str, allow_empty: bool = False) -> Callable[[str], list[int]]:
    """The parser of a `--flag 1,2` option: a list of integers of at least 1."""

    def parse(text: str) -> list[int]:
        try:
            counts = [int(part) for part in text.split(",") if part.strip()]
        except ValueError as error:
            raise argparse.ArgumentTypeError(
                f"{flag} must be numbers separated by commas, e.g. {example}; got {text!r}"
            ) from error
        if (not counts and not allow_empty) or any(count < 1 for count in counts):
            raise argparse.ArgumentTypeError(f"{flag} must list numbers of at least 1, e.g. {example}; got {text!r}")
        return counts

    return parse


worker_counts = positive_counts("--workers", "1,2")
service_sizes = positive_counts("--idle-actions", "20,200", allow_empty=True)


def parse_args(argv: list[str] | None, description: str) -> argparse.Namespace:
    """The bench's options; `description` heads its --help."""
    parser = argparse.ArgumentParser(prog="python -m bench.lifecycle_bench", description=description)
    parser.add_argument("--instances", type=int, default=200, help="Instances brought up and updated")
    parser.add_argument(
        "--idle-instances", type=int, default=2000, help="idle Ready Instances for the RSS and idle-request figures"
    )
    parser.add_argument("--failures", type=int, default=40, help="pod failures for the recreation latency")
    parser.add_argument("--seed", type=int, default=7, help="seed choosing which Instances fail")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds any one phase may take")
    parser.add_argument(
        "--idle-within", type=float, default=600.0,
        help="seconds to wait for the idle Instances; the RSS is read then even if fewer serve",
    )  # fmt: skip
    parser.add_argument(
        "--workers", type=worker_counts, default=[1, 2],
        help="worker process counts, e.g. 1,2: the first runs every phase; each other count runs the "
        "bring-up and the update again on a task queue of its own and compares the end state",
    )  # fmt: skip
    parser.add_argument(
        "--idle-window", type=float, default=300.0, help="seconds the idle Kubernetes requests are counted"
    )
    parser.add_argument(
        "--idle-actions", type=service_sizes, default=[20, 200],
        help="service sizes whose idle Temporal actions are counted over a simulated hour, e.g. 20,200",
    )  # fmt: skip
    parser.add_argument(
        "--unsandboxed", action="store_true",
        help="run the workers' (and the floor's) workflows without the SDK sandbox (OME_WORKER__SANDBOX=false)",
    )  # fmt: skip
    parser.add_argument(
        "--floor-at-scale", action=argparse.BooleanOptionalAction, default=True,
        help="also measure the floor with as many children as idle Instances (about 0.1 s each)",
    )  # fmt: skip
    parser.add_argument(
        "--keep", action="store_true",
        help="keep the run's directory (the dev server's database, the worker and watcher logs) and print its path",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="20 Instances, 100 idle, 5 failures")
    args = parser.parse_args(argv)
    if args.quick:
        args.instances, args.idle_instances, args.failures = 20, 100, 5
        args.idle_window, args.idle_actions = 30.0, [20]
    return args

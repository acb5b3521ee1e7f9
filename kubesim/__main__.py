"""`python -m kubesim`: run one simulated cluster until SIGINT/SIGTERM.

    python -m kubesim --port 0 --kubeconfig .data/kubeconfig --state-file .data/kubesim.json \
        --topology "zones=3,nodes-per-zone=4,gpus=8" --crds product

As a workload cluster of a multi-cluster control plane, add `--tls --token TOKEN --gateway-port 0`:
HTTPS with a CA made at start (the kubeconfig carries it inline, and the token), 401 for requests
without the token, and the inference gateway endpoint (`kubesim.gateway`) on its own port.

Prints `kubesim listening on http://127.0.0.1:PORT (kubeconfig: PATH)` once serving (https, and
`(kubeconfig: PATH, gateway: http://127.0.0.1:GATEWAY_PORT)` with a gateway); on a
signal it saves its objects to the state file and exits 0, and a restart with the same state
file finds the cluster as it was left.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from kubesim.cluster import Cluster
from kubesim.handle import write_kubeconfig
from kubesim.timing import Timing
from kubesim.topology import TopologyError


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kubesim", description="Run a simulated Kubernetes cluster.")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 picks a free one)")
    parser.add_argument("--kubeconfig", default=".data/kubeconfig", help="where to write the kubeconfig")
    parser.add_argument("--state-file", default=None, help="JSON file the objects are saved to and restored from")
    parser.add_argument("--topology", default="zones=3,nodes-per-zone=4,gpus=8",
                        help='node layout, e.g. "zones=3,nodes-per-zone=4,gpus=8", or a YAML file path')
    parser.add_argument("--crds", choices=["product", "all", "none"], default="product",
                        help="CRDs to preload from deploy/crds (all = also deploy/crds/optional)")
    parser.add_argument("--time-factor", type=float, default=1.0,
                        help="scales grace periods, toleration windows and back-offs (1.0 = real time)")
    parser.add_argument("--pull-seconds", type=float, default=2.0, help="default image pull time")
    parser.add_argument("--start-seconds", type=float, default=1.0, help="default container start time")
    parser.add_argument("--ready-seconds", type=float, default=2.0, help="default time from start to ready")
    parser.add_argument("--stop-seconds", type=float, default=1.0,
                        help="time a container takes to exit after SIGTERM, scaled by --time-factor "
                             "(negative: containers ignore SIGTERM and are killed when the grace period ends)")
    parser.add_argument("--tls", action="store_true",
                        help="serve HTTPS with a CA and certificate for 127.0.0.1/localhost made at start")
    parser.add_argument("--token", default=None,
                        help="answer 401 to requests without 'Authorization: Bearer TOKEN' (the kubeconfig carries it)")
    parser.add_argument("--gateway-port", type=int, default=None,
                        help="also serve the inference gateway endpoint on this port (0 picks a free one)")
    parser.add_argument("--log-level", default="WARNING")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> int:
    timing = Timing(pull_seconds=args.pull_seconds, start_seconds=args.start_seconds,
                    ready_seconds=args.ready_seconds, factor=args.time_factor, stop_seconds=args.stop_seconds)
    try:
        cluster = Cluster(topology=args.topology, timing=timing,
                          crds=None if args.crds == "none" else args.crds, state_file=args.state_file,
                          tls=args.tls, token=args.token, gateway_port=args.gateway_port)
    except (TopologyError, ValueError) as exc:
        print(f"kubesim: --topology {args.topology!r}: {exc}", file=sys.stderr)
        return 2
    try:
        await cluster.start("127.0.0.1", args.port)
    except ValueError as exc:
        print(f"kubesim: {exc}", file=sys.stderr)
        await cluster.stop()
        return 2
    url = cluster.url
    credentials = cluster.credentials
    kubeconfig = write_kubeconfig(args.kubeconfig, url, token=args.token,
                                  ca_pem=credentials.ca_pem if credentials else None)
    gateway = f", gateway: {cluster.gateway_url}" if cluster.gateway_url else ""
    print(f"kubesim listening on {url} (kubeconfig: {Path(kubeconfig)}{gateway})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await cluster.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return asyncio.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())

"""``fairshared run``: the daemon (:mod:`fairshared.daemon.service`), started from the command line."""

from __future__ import annotations

import argparse

from . import positive_float as _positive_float


def register(subparsers) -> None:
    r = subparsers.add_parser(
        "run",
        help="run the daemon: every calc period pull, compute, push, and serve Prometheus metrics",
        description="Run the fair-share daemon. Every period it reads a complete snapshot of the cluster, "
        "computes fair-share factors, pushes changed values to pending jobs and publishes metrics on "
        "/metrics and the read-only JSON API on /api/v1/. SIGUSR1 runs a cycle now, SIGHUP reloads the config, SIGTERM stops. Logs: JSON lines "
        "under systemd or when not on a terminal, short key=value lines on one (logging.format).",
    )
    r.add_argument("--config", metavar="FILE", help="TOML configuration (default: built-in defaults; "
                   "anything not set is read from the cluster's own configuration)")
    r.add_argument("--demo", action="store_true",
                   help="run on a built-in simulated cluster (no Slurm needed)")
    r.add_argument("--once", action="store_true", help="run one cycle and exit (status 1 if it failed)")
    r.add_argument("--dry-run", action="store_true",
                   help="compute and report what would be pushed; push nothing")
    r.add_argument("--period", type=_positive_float, metavar="SECONDS",
                   help="seconds between cycles, at most 86400 (default: the cluster's PriorityCalcPeriod)")
    r.add_argument("--listen", metavar="HOST:PORT",
                   help="metrics/HTTP address, [IPV6]:PORT for IPv6 (default "
                   "127.0.0.1:9817; not loopback: needs http.token_file or http.allow_unauthenticated)")
    r.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from ..daemon.service import run  # late: only this command needs the daemon's imports

    return run(args.config, demo=args.demo, once=args.once, dry_run=args.dry_run, period=args.period,
               listen=args.listen)

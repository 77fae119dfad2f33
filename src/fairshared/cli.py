"""The ``fairshared`` command line."""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from typing import Iterator, TextIO

from . import __version__
from .engine import ALGORITHMS, Params, build_tree, compute
from .inputs.snapshot import dump_snapshot, load_snapshot
from .inputs.sshare_dump import parse_sshare
from .model import InputError, Snapshot
from .output import FORMATS, write
from .sources.slurm_cli import SlurmCli, SourceError
from .commands import positive_float as _positive_float

EXIT_BAD_INPUT = 2
EXIT_SOURCE = 1


@contextmanager
def _open_in(path: str) -> Iterator[tuple[TextIO, str]]:
    if path == "-":
        yield sys.stdin, "<stdin>"
        return
    try:
        fh = open(path, encoding="utf-8", errors="strict")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path) from None
    with fh:
        yield fh, path


def algorithm_from_config(config: dict) -> str | None:
    """Slurm's choice: Fair Tree unless PriorityFlags has NO_FAIR_TREE (or DEPTH_OBLIVIOUS)."""
    flags = config.get("priority_flags")
    if flags is None:
        return None
    flags = {str(f).upper() for f in flags}
    return "classic" if flags & {"NO_FAIR_TREE", "DEPTH_OBLIVIOUS"} else "fair_tree"


def load_input(args: argparse.Namespace) -> Snapshot:
    if args.source == "slurm":
        return SlurmCli(timeout=args.timeout).snapshot(jobs=False)
    if args.from_sshare:
        with _open_in(args.from_sshare) as (fh, name):
            try:
                return parse_sshare(fh, name)
            except UnicodeDecodeError as exc:
                raise InputError(f"is not UTF-8 text ({exc.reason})", name) from None
    with _open_in(args.snapshot) as (fh, name):
        try:
            return load_snapshot(fh, name)
        except UnicodeDecodeError as exc:
            raise InputError(f"is not UTF-8 text ({exc.reason})", name) from None


def cmd_compute(args: argparse.Namespace) -> int:
    if args.usage == "accounting" and args.source != "slurm":
        raise InputError("--usage accounting needs --source slurm (it reads the job records with sacct)")
    snap = load_input(args)
    if args.usage == "accounting":
        from .commands.usage import replace_with_accounting

        snap = replace_with_accounting(snap, args.timeout)
    algorithm = args.algorithm or algorithm_from_config(snap.config) or "fair_tree"
    dampening = args.dampening if args.dampening is not None else snap.config.get("dampening", 1)
    levels = args.priority_levels if args.priority_levels is not None else snap.config.get("priority_levels")
    if not isinstance(dampening, (int, float)) or dampening <= 0:
        raise InputError(f"FairShareDampeningFactor must be a number > 0, not {dampening!r}")
    tree = build_tree(snap.associations)
    result = compute(tree, algorithm, Params(dampening=float(dampening), priority_levels=levels,
                                             zero_shares_best=args.zero_shares_best))
    if args.save_snapshot:
        try:
            with open(args.save_snapshot, "w", encoding="utf-8") as fh:
                dump_snapshot(snap, fh)
        except OSError as exc:
            raise InputError(f"cannot write snapshot: {exc.strerror}", args.save_snapshot) from None
    write(result, args.format, sys.stdout)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .daemon.service import run

    return run(args.config, demo=args.demo, once=args.once, dry_run=args.dry_run, period=args.period,
               listen=args.listen)


def recompute_token(args: argparse.Namespace, cfg) -> str | None:
    """--token-file, else $FAIRSHARED_TOKEN, else the daemon's own (http.token / http.token_file).
    Never from the command line: argv is readable by every user of the host (ps, /proc)."""
    import os

    from .daemon.config import resolve_token

    if args.token is not None:
        raise InputError("--token would put the secret in the process list: use --token-file FILE "
                         "or $FAIRSHARED_TOKEN")
    if args.token_file:
        return resolve_token(cfg.http.model_copy(update={"token": None, "token_file": args.token_file}))
    env = os.environ.get("FAIRSHARED_TOKEN")
    if env is not None:
        if not env.strip():
            raise InputError("$FAIRSHARED_TOKEN is empty")
        return env.strip()
    return resolve_token(cfg.http)


def cmd_recompute(args: argparse.Namespace) -> int:
    import json
    import os
    import signal as _signal
    import time
    import urllib.error
    import urllib.request

    from .daemon.config import load_config
    from .daemon.service import pid_file, state_dir

    cfg = load_config(args.config)
    if args.signal:
        pf = pid_file(cfg)
        if pf is None or not pf.exists():
            raise InputError("no pid file (set state.pid_file, or run under systemd with RuntimeDirectory=)",
                             str(pf) if pf else None)
        status_file = state_dir(cfg) / "last-cycle.json"

        def number() -> int:
            try:
                return int(json.loads(status_file.read_text())["cycle"])
            except (OSError, ValueError, KeyError, TypeError):
                return 0

        before = number()
        try:
            os.kill(int(pf.read_text().strip()), _signal.SIGUSR1)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot signal the daemon: {exc}", str(pf)) from None
        deadline = time.monotonic() + args.timeout
        while number() <= before:
            if time.monotonic() > deadline:
                print("fairshared: error: the daemon did not finish a cycle in time", file=sys.stderr)
                return 1
            time.sleep(0.2)
        status = json.loads(status_file.read_text())
    else:
        url = (args.url or f"http://{cfg.http.listen}").rstrip("/") + "/-/recompute"
        token = recompute_token(args, cfg)
        req = urllib.request.Request(url, data=b"", method="POST")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=args.timeout) as resp:
                status = json.loads(resp.read())
                if resp.status == 202:  # merged into the pending cycle; too many callers wait already
                    print(json.dumps(status, indent=1))
                    return 0
        except urllib.error.HTTPError as exc:
            print(f"fairshared: error: {url}: HTTP {exc.code} {exc.read().decode(errors='replace').strip()}",
                  file=sys.stderr)
            return 1
        except (urllib.error.URLError, OSError) as exc:
            print(f"fairshared: error: cannot reach the daemon at {url}: {getattr(exc, 'reason', exc)}",
                  file=sys.stderr)
            return 1
    status.pop("actions", None)
    print(json.dumps(status, indent=1))
    return 0 if status.get("outcome") == "success" else 1




def _levels(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 1 <= v <= 16:
        raise argparse.ArgumentTypeError(f"{v} is outside 1..16")
    return v


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fairshared",
        description="Fair-share policy daemon for Slurm: computes classic, Fair Tree and LEVEL_BASED "
        "fair-share factors.",
    )
    parser.add_argument("--version", action="version", version=f"fairshared {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "compute",
        help="compute fair-share factors from an sshare dump or a snapshot and print them like sshare",
        description="Compute every association's fair-share columns (NormShares, NormUsage, EffectvUsage, "
        "FairShare, LevelFS) with the chosen algorithm and print them like `sshare -a -l`.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--from-sshare", metavar="FILE",
                     help="output of `sshare -a -l -P` from Slurm >= 22.05 ('-' = standard input)")
    src.add_argument("--snapshot", metavar="FILE", help="a fairshared snapshot (JSON) ('-' = standard input)")
    src.add_argument("--source", choices=["slurm"],
                     help="read the live cluster through Slurm's command-line tools (scontrol, sshare, sacctmgr)")
    p.add_argument("--timeout", type=_positive_float, default=60.0, metavar="SECONDS",
                   help="with --source slurm: how long each Slurm command may take (default: 60)")
    p.add_argument("--algorithm", choices=ALGORITHMS,
                   help="fair-share algorithm (default: what the snapshot's PriorityFlags say, else fair_tree)")
    p.add_argument("--dampening", type=_positive_float, metavar="D",
                   help="FairShareDampeningFactor for classic (default: the snapshot's, else 1)")
    p.add_argument("--priority-levels", type=_levels, metavar="L",
                   help="PriorityLevels for level_based, 1..16 (default: enough for the deepest association)")
    p.add_argument("--zero-shares-best", action="store_true",
                   help="level_based: give 0-share associations the best bucket, as Slurm 14.11.0-pre5 did "
                   "(by default they rank last)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    p.add_argument("--save-snapshot", metavar="FILE", help="also write what was read as a fairshared snapshot")
    p.add_argument("--usage", choices=["slurmctld", "accounting"], default="slurmctld",
                   help="with --source slurm: the raw usage slurmctld holds (default), or the one computed from "
                   "the accounting records (sacct) with slurmctld's own arithmetic")
    p.set_defaults(func=cmd_compute)

    r = sub.add_parser(
        "run",
        help="run the daemon: every calc period pull, compute, push, and serve Prometheus metrics",
        description="Run the fair-share daemon. Every period it reads a complete snapshot of the cluster, "
        "computes fair-share factors, pushes changed values to pending jobs and publishes metrics on "
        "/metrics. SIGUSR1 runs a cycle now, SIGHUP reloads the config, SIGTERM stops. Logs: JSON lines "
        "under systemd or when not on a terminal, short key=value lines on one (logging.format).",
    )
    r.add_argument("--config", metavar="FILE", help="TOML configuration (default: built-in defaults; "
                   "anything not set is read from the cluster's own configuration)")
    r.add_argument("--demo", action="store_true", help="run on a built-in simulated cluster (no Slurm needed)")
    r.add_argument("--once", action="store_true", help="run one cycle and exit (status 1 if it failed)")
    r.add_argument("--dry-run", action="store_true", help="compute and report what would be pushed; push nothing")
    r.add_argument("--period", type=_positive_float, metavar="SECONDS",
                   help="seconds between cycles (default: the cluster's PriorityCalcPeriod)")
    r.add_argument("--listen", metavar="HOST:PORT", help="metrics/HTTP address, [IPV6]:PORT for IPv6 (default "
                   "127.0.0.1:9817; not loopback: needs http.token_file or http.allow_unauthenticated)")
    r.set_defaults(func=cmd_run)

    q = sub.add_parser(
        "recompute",
        help="ask the running daemon for a cycle now and print its result",
        description="Ask the running daemon to run a cycle now and wait for its result: over HTTP "
        "(POST /-/recompute on the daemon's listen address) or, with --signal, by sending SIGUSR1 to "
        "the pid in the daemon's pid file and waiting for its status file.",
    )
    q.add_argument("--config", metavar="FILE", help="the daemon's TOML configuration (for its address and token)")
    q.add_argument("--url", help="the daemon's base URL (default: http://<http.listen>)")
    q.add_argument("--token-file", metavar="FILE",
                   help="file whose first line is the bearer token (default: $FAIRSHARED_TOKEN, else the "
                   "config's http.token_file or http.token)")
    q.add_argument("--token", help=argparse.SUPPRESS)  # refused with a message: argv is public
    q.add_argument("--signal", action="store_true", help="use SIGUSR1 and the pid/status files instead of HTTP")
    q.add_argument("--timeout", type=_positive_float, default=300.0, metavar="SECONDS")
    q.set_defaults(func=cmd_recompute)
    __import__("fairshared.commands.priority_cmds", fromlist=["register"]).register(sub)
    __import__("fairshared.commands.usage", fromlist=["register"]).register(sub)
    __import__("fairshared.commands.whatif_cmd", fromlist=["register"]).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        print(f"fairshared: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SourceError as exc:
        print(f"fairshared: error: reading the cluster: {exc}", file=sys.stderr)
        return EXIT_SOURCE
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())

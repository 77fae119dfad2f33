"""The ``fairshared`` command line."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from dataclasses import replace

from . import __version__
from .commands import name_list
from .commands import positive_float as _positive_float
from .commands.common import add_source, default_algorithm, load_inputs, parse_at
from .engine import ALGORITHMS, Params, build_tree, compute
from .inputs.priority_snapshot import save_inputs
from .model import InputError
from .output import COLUMNS, FORMATS, parse_columns, selected, write
from .priority import ClusterInfo, PriorityInputs
from .records import SourceError
from .sources.slurm_cli import SlurmCli

EXIT_BAD_INPUT = 2
EXIT_SOURCE = 1


def load_input(args: argparse.Namespace) -> PriorityInputs:
    """compute's input: the live tree alone (jobs only when they are to be saved), or what
    sprio/explain/compare read from --demo, --snapshot or --from-sshare."""
    if args.source == "slurm" and not args.save_snapshot:
        snap = SlurmCli(timeout=args.timeout).snapshot(jobs=False)
        return PriorityInputs(snapshot=snap, cluster=ClusterInfo(), jobs=[], evaluated_at=snap.taken_at)
    return load_inputs(args)


def cmd_compute(args: argparse.Namespace) -> int:
    if args.usage == "accounting" and args.source != "slurm":
        raise InputError("--usage accounting needs --source slurm (it reads the job records with sacct)")
    if args.at != "auto" and not args.demo:
        raise InputError("compute --at goes with --demo (the other inputs are taken at their own time)")
    pi = load_input(args)
    snap = pi.snapshot
    if args.usage == "accounting":
        from .commands.usage import replace_with_accounting

        snap = replace_with_accounting(snap, args.timeout)
        pi = replace(pi, snapshot=snap)
    algorithm = args.algorithm or default_algorithm(snap.config or {})
    dampening = args.dampening if args.dampening is not None else snap.config.get("dampening", 1)
    levels = args.priority_levels if args.priority_levels is not None else snap.config.get("priority_levels")
    if not isinstance(dampening, (int, float)) or dampening <= 0:
        raise InputError(f"FairShareDampeningFactor must be a number > 0, not {dampening!r}")
    tree = build_tree(snap.associations)
    result = compute(tree, algorithm, Params(dampening=float(dampening), priority_levels=levels,
                                             zero_shares_best=args.zero_shares_best))
    if args.save_snapshot:
        save_inputs(pi, args.save_snapshot, pi.evaluated_at, getattr(args, "snapshot_stdout", None))
    style, columns = args.format
    if args.parsable:
        style = "parsable"
    rows = selected(result, args.users, args.accounts) if args.users or args.accounts else None
    if rows is not None and (not rows or (args.users and not any(result.tree.is_user[i] for i in rows))):
        given = (("-u", args.users), ("-A", args.accounts))
        print("fairshared: no association matches " + " ".join(f"{f} {','.join(v)}" for f, v in given if v),
              file=sys.stderr)
    write(result, style, sys.stdout, rows, columns)
    return 0


def _format(text: str) -> tuple[str, list[str] | None]:
    """--format: an output style (table, parsable, json) or sshare's columns (Account,User,FairShare)."""
    if text.strip().lower() in FORMATS:
        return text.strip().lower(), None
    try:
        return "table", parse_columns(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (or a style: {', '.join(FORMATS)})") from None


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
    import time
    import urllib.error
    import urllib.request

    from .daemon.config import load_config
    from .daemon.pidfile import signal_daemon
    from .daemon.service import pid_file, state_dir

    cfg = load_config(args.config)
    if args.signal:
        pf = pid_file(cfg)
        if pf is None or not os.path.lexists(pf):
            raise InputError("no pid file (set state.pid_file, or run under systemd with RuntimeDirectory=)",
                             str(pf) if pf else None)
        status_file = state_dir(cfg) / "last-cycle.json"

        def number() -> int:
            try:
                return int(json.loads(status_file.read_text())["cycle"])
            except (OSError, ValueError, KeyError, TypeError):
                return 0

        before = number()
        signal_daemon(pf)  # only a fairshared process, named by a pid file nobody else could plant
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
            with _no_redirects_opener().open(req, timeout=args.timeout) as resp:
                status = json.loads(resp.read())
                if resp.status == 202:  # merged into the pending cycle; too many callers wait already
                    print(json.dumps(status, indent=1))
                    return 0
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                print(f"fairshared: error: {url}: HTTP {exc.code} redirects to "
                      f"{exc.headers.get('Location', '(no Location)')!r}: not followed (the token would go "
                      f"along); give the daemon's own address with --url", file=sys.stderr)
                return 1
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




def _no_redirects_opener():
    """An opener that follows no redirect: urllib would resend the request's headers,
    ``Authorization`` included, to wherever ``Location`` says; ``recompute`` talks to the daemon
    only, so a 3xx surfaces as an HTTPError."""
    import urllib.request

    class RefuseRedirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            return None

    return urllib.request.build_opener(RefuseRedirects())


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
    add_source(p, required=True)
    p.add_argument("--algorithm", choices=ALGORITHMS,
                   help="fair-share algorithm (default: what the snapshot's PriorityFlags say, else fair_tree)")
    p.add_argument("--dampening", type=_positive_float, metavar="D",
                   help="FairShareDampeningFactor for classic (default: the snapshot's, else 1)")
    p.add_argument("--priority-levels", type=_levels, metavar="L",
                   help="PriorityLevels for level_based, 1..16 (default: enough for the deepest association)")
    p.add_argument("--zero-shares-best", action="store_true",
                   help="level_based: give 0-share associations the best bucket, as Slurm 14.11.0-pre5 did "
                   "(by default they rank last)")
    p.add_argument("-o", "--format", type=_format, default=("table", None), metavar="STYLE|COL,COL",
                   help="output style: table (default), parsable or json; or, as sshare's --format, the columns "
                   f"to print by sshare's names in any case ({','.join(COLUMNS)})")
    p.add_argument("-P", "--parsable", action="store_true",
                   help="'|'-separated like `sshare -P` (the same as --format parsable; with columns too)")
    p.add_argument("-u", "--users", type=name_list, metavar="USER[,USER]",
                   help="as sshare -u: only these users' associations (the account rows stay)")
    p.add_argument("-A", "--accounts", type=name_list, metavar="ACCT[,ACCT]",
                   help="as sshare -A: only associations in these accounts (each account's row and its "
                   "users; its sub-accounts are accounts of their own)")
    p.add_argument("--at", type=parse_at, default="auto", metavar="WHEN",
                   help="with --demo: the moment the simulated cluster is shown at, as Unix seconds or an "
                   "ISO 8601 date-time (default: now)")
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
        "(POST /-/recompute on the daemon's listen address; a redirect is refused, never followed with "
        "the token) or, with --signal, by sending SIGUSR1 to the pid in the daemon's pid file and waiting "
        "for its status file. The pid file must be a regular file owned by you, root or the daemon's user, "
        "writable by no one else, and name a fairshared process; otherwise nothing is signalled (exit 2).",
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
    for name in ("sprio", "explain", "compare", "usage", "whatif_cmd"):
        __import__(f"fairshared.commands.{name}", fromlist=["register"]).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if getattr(args, "save_snapshot", None) == "-":  # the snapshot is the output: the rest goes nowhere
            args.snapshot_stdout = sys.stdout
            with contextlib.redirect_stdout(io.StringIO()):
                return args.func(args)
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

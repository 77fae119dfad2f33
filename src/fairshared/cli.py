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
    snap = load_input(args)
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


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not v > 0 or v != v or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number > 0")
    return v


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
    p.set_defaults(func=cmd_compute)
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

"""What ``sprio``, ``explain`` and ``compare`` share: the source and ``--at`` arguments, reading
the inputs, the evaluation time, and running the engine on them.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import io
import sys
import time
from dataclasses import dataclass, replace

from ..engine import Params, build_tree, compute
from ..engine.decide import decide
from ..engine.result import Result
from ..inputs.priority_snapshot import load_inputs_file, read_text, save_inputs
from ..model import InputError, Snapshot
from ..settings import ClusterSettings
from ..slurm.sshare import parse_sshare
from ..sources.slurm_cli import SlurmCli
from . import positive_float


def parse_at(text: str) -> str | float:
    """``--at``: auto, now, last-calc, Unix seconds or an ISO 8601 date-time (local time if naive)."""
    t = text.strip().lower()
    if t in ("auto", "now", "last-calc"):
        return t
    try:
        return float(t)
    except ValueError:
        pass
    try:
        return _dt.datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not auto, now, last-calc, Unix seconds or an ISO 8601 date-time") from None


def add_source(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    """Where the tree, jobs and weights come from: the live cluster, --demo, --snapshot or --from-sshare;
    and --save-snapshot to keep what was read."""
    src = p.add_mutually_exclusive_group(required=required)
    src.add_argument("--source", choices=["slurm"], default=None,
                     help="read the live cluster through Slurm's tools" + ("" if required else " (the default)"))
    src.add_argument("--demo", action="store_true",
                     help="the built-in simulated cluster (the one `fairshared run --demo` runs): no Slurm needed")
    src.add_argument("--snapshot", metavar="FILE",
                     help="a fairshared snapshot (JSON, docs/snapshot-format.md) ('-' = standard input)")
    src.add_argument("--from-sshare", metavar="FILE",
                     help="output of `sshare -a -l -P` (no jobs; its FairShare column is Slurm's order)")
    p.add_argument("--timeout", type=positive_float, default=60.0, metavar="SECONDS",
                   help="with the live cluster: how long each Slurm command may take (default: 60)")
    p.add_argument("--save-snapshot", metavar="FILE",
                   help="also write what was read (tree, config, pending jobs, partitions, QOS) as a snapshot "
                   "that every command reads back with --snapshot FILE; '-' writes it to standard output "
                   "instead of the command's own output")


def add_at(p: argparse.ArgumentParser) -> None:
    p.add_argument("--at", type=parse_at, default="auto", metavar="WHEN",
                   help="when to evaluate the age factor: auto (default: slurmctld's last priority "
                   "calculation when its state file is readable, which is what sprio shows; else now; "
                   "a snapshot's own time), now, last-calc, Unix seconds or an ISO 8601 date-time; "
                   "with --demo also the moment the simulated cluster is shown at (default: now)")


def load_inputs(args: argparse.Namespace, *, sshare: bool = False) -> Snapshot:
    """The tree, cluster and jobs (a snapshot with details: ``cluster_info`` set) from --source slurm
    (the default), --demo, --snapshot or --from-sshare.

    ``sshare``: from the live cluster, also read sshare's FairShare column (Slurm's current order).
    """
    if getattr(args, "from_sshare", None):
        text, name = read_text(args.from_sshare)
        snap = parse_sshare(io.StringIO(text), name)
        return replace(snap.with_empty_details(), reported_fairshare=snap.reported_fairshare or None)
    if getattr(args, "snapshot", None):
        return load_inputs_file(args.snapshot)
    if getattr(args, "demo", False):
        from ..sources.demo import demo_inputs

        return demo_inputs(demo_time(args))
    return SlurmCli(timeout=args.timeout).snapshot(details=True, sshare=sshare)


def demo_time(args: argparse.Namespace) -> float:
    """The moment ``--demo`` shows: ``--at`` when it is a time, else the demo's clock (now)."""
    from ..sources import demo

    at = getattr(args, "at", None)
    return at if isinstance(at, float) else demo.clock()


def clock_for(args: argparse.Namespace):
    """What ``--at now`` means: the demo's clock with ``--demo`` (pinned in tests), else the system's."""
    if getattr(args, "demo", False):
        from ..sources import demo

        return demo.clock
    return time.time


def save_if_asked(args: argparse.Namespace, pi: Snapshot, evaluated_at: float | None) -> None:
    if getattr(args, "save_snapshot", None):
        save_inputs(pi, args.save_snapshot, evaluated_at, getattr(args, "snapshot_stdout", None))


def evaluation_time(at: str | float, pi: Snapshot, live: bool, clock=time.time) -> tuple[int, str]:
    """The time the age factor is evaluated at, and a phrase saying which."""
    if isinstance(at, float):
        return int(at), "the time given with --at"
    if at == "now":
        return int(clock()), "now"
    if at == "last-calc":
        if pi.last_calc is None:
            raise InputError("--at last-calc: slurmctld's last priority calculation is unknown (its "
                             "StateSaveLocation/priority_last_decay_ran is unreadable here)")
        return int(pi.last_calc), "slurmctld's last priority calculation"
    if not live and pi.evaluated_at is not None:
        return int(pi.evaluated_at), "the snapshot's time"
    if live and pi.last_calc is not None:
        return int(pi.last_calc), "slurmctld's last priority calculation"
    return int(time.time()), "now"


def engine_result(snap: Snapshot, algorithm: str | None = None, tree=None) -> Result:
    """``algorithm`` (None: the cluster's) over ``snap`` with the cluster's parameters (:func:`decide`)."""
    name, params = decide(snap.settings, algorithm=algorithm)
    return run_engine(snap, name, params, tree)


def run_engine(snap: Snapshot, algorithm: str, params: Params, tree=None) -> Result:
    tree = tree if tree is not None else build_tree(snap.associations)
    try:
        return compute(tree, algorithm, params)
    except (ValueError, TypeError) as exc:
        raise InputError(f"cannot compute {algorithm}: {exc}") from None


def live(args: argparse.Namespace) -> bool:
    """Whether the inputs come from the live cluster (not --demo, --snapshot or --from-sshare)."""
    return not (getattr(args, "snapshot", None) or getattr(args, "from_sshare", None)
                or getattr(args, "demo", False))


@dataclass
class Evaluated:
    """Inputs read, the time the age factor is evaluated at (and a phrase saying which), the
    algorithm and parameters chosen (:func:`decide`) and the engine's result for them."""

    pi: Snapshot  # read with details
    now: int
    when: str
    settings: ClusterSettings
    algorithm: str
    params: Params
    result: Result


def evaluate(args: argparse.Namespace) -> Evaluated:
    """What sprio and explain --vs start from: load, warn, pick the time and the algorithm, compute."""
    pi = load_inputs(args)
    warn(pi)
    now, when = evaluation_time(args.at, pi, live(args), clock_for(args))
    settings = pi.settings
    algorithm, params = decide(settings, algorithm=args.algorithm)
    return Evaluated(pi, now, when, settings, algorithm, params, run_engine(pi, algorithm, params))


def warn(pi: Snapshot) -> None:
    for w in pi.warnings:
        print(f"fairshared: warning: {w}", file=sys.stderr)

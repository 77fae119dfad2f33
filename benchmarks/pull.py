"""The pull's Python cost: parsing what Slurm's command-line tools print, offline, at scale.

Synthesises the text a 22.05 cluster prints (``scontrol show assoc_mgr flags=assoc`` with every
per-association line slurmctld writes, ``sshare -a -l -P -m`` with Fair Tree's FairShare under
the ``lft`` order, ``squeue`` in SQUEUE_LONG with the unit separator and array rows, ``sprio``
in SPRIO_FORMAT with multi-partition and operator-set jobs) and times each stage of the
command-line source's read on it: the parsers, the association conversion, 22.05's
sibling-order inference, ``read_jobs``, ``build_tree`` (also on 1M associations) and one whole
``SlurmCli.snapshot`` on canned command output (no process is started).

Each figure is the best of a few runs (at least --repeat, and as many as fit in 0.25 s).  For
the functions the pull-speed work changed, the implementation they replaced (tests/pull_reference.py,
the baseline test_pull_speed checks them against) is timed in the same run on the same text;
``old/new`` is their ratio, and each old result is checked equal to the new one first.  The
whole snapshot is compared with the same source using all the replaced readers (OldCanned).
Figures at 1M move by ~40 % with the heap's history (objects made after others were freed
are scattered in memory): build_tree runs ~1.4x faster in a fresh process than here, after
the 100k stages, old and new alike.

    python benchmarks/pull.py [--assocs 10000,100000] [--jobs 5000,100000]
                              [--build 10000,100000,1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
import pull_reference as old  # noqa: E402
from synthetic import make_associations  # noqa: E402

from fairshared.engine import compute  # noqa: E402
from fairshared.engine.sibling_order import LFT, NAME, name_key  # noqa: E402
from fairshared.engine.tree import Tree  # noqa: E402
from fairshared.engine.tree_build import build_tree  # noqa: E402
from fairshared.model import PARENT, Association, Job, Snapshot  # noqa: E402
from fairshared.sources.jobinfo_cli import read_jobs  # noqa: E402
from fairshared.sources.slurm_cli import SlurmCli, associations_from_assoc_mgr, check_same_ids  # noqa: E402
from fairshared.slurm.assoc_mgr import AssocRecord, parse_assoc_mgr  # noqa: E402
from fairshared.settings import ClusterSettings  # noqa: E402
from fairshared.slurm.config import parse_config  # noqa: E402
from fairshared.slurm.sprio import parse_sprio_facts  # noqa: E402
from fairshared.slurm.squeue import SEP, parse_squeue  # noqa: E402
from fairshared.slurm.sshare import parse_sshare, parse_sshare_ids  # noqa: E402

# ================================================================================================
# Synthetic Slurm text
# ================================================================================================

TRES_LINE = "cpu={},mem={},energy={},node={},billing={},fs/disk={},vmem={},pages={}"


def _grp(counts: tuple[int, ...]) -> str:
    return TRES_LINE.format(*(f"N({c})" for c in counts))


def make_cluster(size: int, seed: int = 1) -> list[Association]:
    """A 22.05 tree of ``size`` associations (synthetic.make_associations' shape): ids in list order,
    ``lft`` numbered depth first with the newest sibling first (slurmdbd's order), account usage the
    sum of its subtree, 2 % of users with per-partition associations (two partitions, the same name:
    equal name keys), 5 % of the groups idle (their accounts tie at LevelFS = inf)."""
    rng = np.random.default_rng(seed + 1000)
    base = make_associations(size, seed)
    accounts = [a for a in base if a.user is None]
    groups = {a.parent for a in base if a.user is not None and a.parent != "root"}
    idle = {g for g in sorted(groups) if rng.random() < 0.05}
    rows: list[Association] = []
    for a in base:
        if a.user is None:
            rows.append(a)
            continue
        usage = 0.0 if a.account in idle else round((a.usage or 0.0) + float(rng.integers(0, 100)) / 100, 2)
        if a.account != "root" and rng.random() < 0.02 and len(rows) + 1 < size:
            rows.append(replace(a, usage=usage, partition="debug"))
            rows.append(replace(a, usage=round(usage / 2, 2), partition="gpu"))
        else:
            rows.append(replace(a, usage=usage))
    rows = rows[:size]
    kids: dict[str, list[Association]] = {a.account: [] for a in accounts}
    for a in rows[1:]:
        kids[a.parent_account].append(a)
    total: dict[str, float] = {}

    def subtotal(acct: str) -> float:  # iterative post-order: trees can be deep enough for recursion
        order, stack = [], [acct]
        while stack:
            x = stack.pop()
            order.append(x)
            stack.extend(k.account for k in kids[x] if k.user is None)
        for x in reversed(order):
            total[x] = round(sum((total[k.account] if k.user is None else k.usage) for k in kids[x]), 2) + 0.0
        return total[acct]

    subtotal("root")
    lft: dict[tuple, int] = {}
    counter = 0
    stack = [rows[0]]
    while stack:  # newest sibling (last in list) first
        a = stack.pop()
        counter += 1
        lft[a.key] = counter
        if a.user is None:
            stack.extend(kids[a.account])  # popped last-first
    return [replace(a, usage=total[a.account] if a.user is None else a.usage, order=lft[a.key]) for a in rows]


def assoc_mgr_text(assocs: list[Association], cluster: str = "fsbench") -> str:
    """``scontrol show assoc_mgr flags=assoc`` as slurmctld 22.05 prints it, in lft order."""
    ids = {a.key: i for i, a in enumerate(assocs, start=1)}
    out = ["Current Association Manager state", "", "Association Records", ""]
    for a in sorted(assocs, key=lambda x: x.order):
        ident = ids[a.key]
        uname = f"{a.user}({1000 + ident})" if a.user else ""
        pa = f"{a.parent}({ids[(a.parent, None, None)]})" if a.user is None and a.parent else ""
        shares = 2147483647 if a.shares == PARENT else a.shares
        mins = int(a.usage // 60)
        out += [
            f"ClusterName={cluster} Account={a.account} UserName={uname} Partition={a.partition or ''} "
            f"Priority=0 ID={ident}",
            f"    SharesRaw/Norm/Level/Factor={shares}/0.00/{max(1, ident % 151)}/0.00",
            f"    UsageRaw/Norm/Efctv={a.usage:.2f}/0.00/0.00",
            f"    ParentAccount={pa} Lft={a.order} DefAssoc={'Yes' if a.user else 'No'}",
            f"    GrpJobs=N({ident % 3}) GrpJobsAccrue=N(0)",
            f"    GrpSubmitJobs=N({ident % 5}) GrpWall=N({mins / 100:.2f})",
            f"    GrpTRES={_grp((ident % 7, 0, 0, ident % 2, ident % 7, 0, 0, 0))}",
            f"    GrpTRESMins={_grp((mins, 0, 0, mins // 32, mins, 0, 0, 0))}",
            f"    GrpTRESRunMins={_grp((0,) * 8)}",
            "    MaxJobs= MaxJobsAccrue= MaxSubmitJobs= MaxWallPJ=",
            "    MaxTRESPJ=",
            "    MaxTRESPN=",
            "    MaxTRESMinsPJ=",
            "    MinPrioThresh=",
        ]
    out += ["", "QOS Records", "", "QOS=normal(1)", "    UsageRaw=0.000000", "    GrpJobs=N(0)", ""]
    return "\n".join(out)


def _sshare_rows(assocs: list[Association]):
    """(association, depth, RawShares, FairShare) in the order 22.05's sshare prints them: the tree
    depth first, users then accounts by name, FairShare from Fair Tree under the lft order (what
    slurmctld holds after a load)."""
    res = compute(assocs, "fair_tree")
    t = res.tree
    fs = {t.key(i): float(res.fairshare[i]) for i in range(t.n) if t.user[i] is not None}
    kids: dict[str, list[Association]] = {a.account: [] for a in assocs if a.user is None}
    for a in assocs[1:]:
        kids[a.parent_account].append(a)
    stack = [(assocs[0], 0)]
    while stack:
        a, depth = stack.pop()
        shares = "" if a.user is None and a.parent is None else ("parent" if a.shares == PARENT else a.shares)
        yield a, depth, shares, f"{fs[a.key]:f}" if a.user is not None else ""
        if a.user is None:
            stack.extend((k, depth + 1) for k in sorted(kids[a.account], key=name_key, reverse=True))


def sshare_text(assocs: list[Association]) -> str:
    """``sshare -a -l -P -m`` as 22.05 prints it (:func:`_sshare_rows`)."""
    rows = ["Account|User|Partition|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|"
            "GrpTRESMins|TRESRunMins"]
    run_mins = "cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0"
    for a, depth, shares, fair in _sshare_rows(assocs):
        rows.append(f"{' ' * depth}{a.account}|{a.user or ''}|{a.partition or ''}|{shares}|0.012345|"
                    f"{int(a.usage)}|0.000123|0.004567|{fair}|1.234567||{run_mins}")
    return "\n".join(rows) + "\n"


def sshare_ids_text(assocs: list[Association]) -> str:
    """``sshare -a -P -o ID,User,Partition,RawShares,FairShare``: sshare_text()'s rows and order, by
    the IDs of assoc_mgr_text() and without the Account column."""
    ids = {a.key: i for i, a in enumerate(assocs, start=1)}
    rows = ["ID|User|Partition|RawShares|FairShare"]
    for a, _depth, shares, fair in _sshare_rows(assocs):
        rows.append(f"{ids[a.key]}|{a.user or ''}|{a.partition or ''}|{shares}|{fair}")
    return "\n".join(rows) + "\n"


def tree_check_with_names(ours: list[Association], shown: list[Association]) -> None:
    """The cross-check before it read sshare by ID (slurm_cli.check_same_tree until 2026-11-25): the
    whole ``sshare -a -l -P -m``, compared by (account, user, partition), shares and parents."""
    a = {x.key: x for x in ours}
    b = {x.key: x for x in shown}
    if set(a) != set(b):
        raise AssertionError("the trees differ")
    for k, x in a.items():
        y = b[k]
        if k != ("root", None, None) and (x.shares != y.shares or x.parent_account != y.parent_account):
            raise AssertionError(f"{x.label()} differs")


TIME_LIMITS = ("1-00:00:00", "2:00:00", "30:00", "UNLIMITED", "7-00:00:00", "12:00:00")
REASONS = ("Priority", "Priority", "Priority", "Resources", "AssocGrpCpuLimit", "Dependency")


def _tres_request(rng) -> str:
    cpus = int(rng.choice((1, 2, 4, 8, 16, 32, 64)))
    nodes = 1 if cpus <= 32 else 2
    mem = int(rng.choice((1, 2, 4, 8))) * cpus
    mem_text = f"{mem}G" if rng.random() < 0.8 else f"{mem * 1000}M"
    tres = f"cpu={cpus},mem={mem_text},node={nodes},billing={cpus}"
    if rng.random() < 0.1:
        tres += f",gres/gpu={int(rng.choice((1, 2, 4)))}"
    return tres


def jobs_text(assocs: list[Association], n_jobs: int, seed: int = 1) -> tuple[str, str]:
    """(squeue -h -a -t PD -O SQUEUE_LONG, sprio -h -o SPRIO_FORMAT) for ``n_jobs`` pending jobs of
    the tree's users: 8 % array records (``123_[1-100]``, and tasks already split off ``123_7``),
    10 % in two partitions (two sprio rows), 1 % with an operator-set priority (every factor 0)."""
    rng = np.random.default_rng(seed + 2000)
    users = [a for a in assocs if a.user is not None]
    now = 1_795_000_000
    squeue, sprio = [], []
    job_id = 100_000
    for k in range(n_jobs):
        job_id += 1
        a = users[int(rng.integers(0, len(users)))]
        r = rng.random()
        if r < 0.04:
            display = f"{job_id}_[{int(rng.integers(1, 10))}-{int(rng.integers(10, 1000))}]"
        elif r < 0.08:
            display = f"{job_id - int(rng.integers(1, 50))}_{int(rng.integers(0, 100))}"
        else:
            display = str(job_id)
        parts = a.partition or ("batch,debug" if rng.random() < 0.1 else "batch")
        submit = now - int(rng.integers(0, 7 * 86400))
        direct = rng.random() < 0.01
        prio = 1 if direct else int(rng.integers(1000, 100000))
        tres = _tres_request(rng)
        cpus = tres.split(",")[0][4:]
        squeue.append(SEP.join([
            str(job_id), display, a.user, a.account, "normal", str(prio), "0", "PENDING", parts, str(submit),
            str(submit), str(submit + 5), cpus, "1", TIME_LIMITS[k % len(TIME_LIMITS)], tres,
            REASONS[k % len(REASONS)]]))
        for p in parts.split(","):
            if direct:
                sprio.append(SEP.join([str(job_id), p, "0", "0", "0", "0", "0", "0", "0", "0", ""]))
            else:
                sprio.append(SEP.join([str(job_id), p, str(int(rng.integers(0, 3)) * 100), "0",
                                       f"{rng.random():.7f}", "0.0000000", f"{rng.random():.7f}",
                                       f"{rng.random():.7f}", "1.0000000", "0.0000000",
                                       f"cpu={rng.random():.2f},mem={rng.random():.2f}"]))
    return "\n".join(squeue) + "\n", "\n".join(sprio) + "\n"


CONFIG = """\
Configuration data as of 2026-11-24T10:00:00
AccountingStorageEnforce = associations,limits
AccountingStorageTRES   = cpu,mem,energy,node,billing,fs/disk,vmem,pages,gres/gpu
ClusterName             = fsbench
FairShareDampeningFactor = 1
PriorityDecayHalfLife   = 7-00:00:00
PriorityCalcPeriod      = 00:05:00
PriorityFavorSmall      = No
PriorityFlags           =
PriorityMaxAge          = 7-00:00:00
PriorityUsageResetPeriod = NONE
PriorityType            = priority/multifactor
PriorityWeightAge       = 1000
PriorityWeightAssoc     = 0
PriorityWeightFairShare = 10000
PriorityWeightJobSize   = 1000
PriorityWeightPartition = 1000
PriorityWeightQOS       = 1000
PriorityWeightTRES      = CPU=1000,Mem=2000,GRES/gpu=3000
SlurmctldHost[0]        = head1(10.0.0.1)
SlurmctldPort           = 6817
SlurmctldTimeout        = 120 sec
StateSaveLocation       = /var/spool/slurmctld
SLURM_VERSION           = 22.05.8
"""


@dataclass
class Canned(SlurmCli):
    """The command-line source on canned output: no process is started."""

    texts: dict = field(default_factory=dict)

    def _run(self, argv: list[str]) -> str:
        if argv[:3] == ["scontrol", "show", "config"]:
            return CONFIG
        if argv[:3] == ["scontrol", "show", "assoc_mgr"]:
            return self.texts["assoc_mgr"]
        if argv[0] == "sshare" and "-o" in argv:
            return self.texts["sshare_ids"]
        if argv[0] in ("sshare", "squeue", "sprio"):
            return self.texts[argv[0]]
        raise AssertionError(f"unexpected command {argv}")


@dataclass
class OldCanned(Canned):
    """The same source with the readers as they were: old.parse_assoc_mgr, old.parse_sshare,
    old.order_of_22_05 and old.read_jobs, and ``scontrol show config`` parsed twice."""

    def assoc_mgr(self) -> list[AssocRecord]:
        return old.parse_assoc_mgr(self.run(["scontrol", "show", "assoc_mgr", "flags=assoc"]))

    def sshare(self) -> Snapshot:
        text = self.run(["sshare", "-a", "-l", "-P", "-m"])
        return old.parse_sshare(io.StringIO(text), "sshare -a -l -P -m")

    def order_of_22_05(self, assocs: list[Association], reported: dict, settings: ClusterSettings):
        if "NO_FAIR_TREE" not in settings.flags:
            named = old.in_name_order(assocs)
            seen = old.infer({LFT: assocs, NAME: named}, reported)
            if seen:
                self.order_state = seen
            if self.order_state == NAME:
                return named, NAME
        return assocs, LFT

    def pending_jobs(self, skipped: list[str] | None = None) -> list[Job]:
        return old.read_jobs(self, skipped=skipped)

    def raw_config(self) -> dict[str, str]:
        parse_config(self.run(["scontrol", "show", "config"]))  # the second parse the snapshot made
        return super().raw_config()


def snapshots_equal(a, b) -> bool:
    return (a.associations == b.associations and a.jobs == b.jobs
            and [j.tres for j in a.jobs] == [j.tres for j in b.jobs]
            and (a.sibling_order, a.settings, a.controllers, a.skipped_rows, a.cluster, a.source)
            == (b.sibling_order, b.settings, b.controllers, b.skipped_rows, b.cluster, b.source))


# ================================================================================================
# Timing
# ================================================================================================


def best_of(fn, repeat: int, min_total: float = 0.25) -> float:
    """Best of at least ``repeat`` runs, and of as many more as fit in ``min_total`` seconds."""
    best = float("inf")
    spent = 0.0
    runs = 0
    while runs < repeat or (spent < min_total and runs < 200):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best = min(best, dt)
        spent += dt
        runs += 1
    return best


def trees_equal(a: Tree, b: Tree) -> bool:
    return (a.account == b.account and a.user == b.user and a.partition == b.partition
            and a.root_shares == b.root_shares
            and all(np.array_equal(getattr(a, f), getattr(b, f))
                    and getattr(a, f).dtype == getattr(b, f).dtype
                    for f in ("parent", "is_user", "use_parent", "shares", "usage")))


class Report:
    def __init__(self, repeat: int):
        self.repeat = repeat
        print(f"{'stage':32} {'size':>28} {'seconds':>8} {'old s':>8} {'old/new':>7}", flush=True)

    def row(self, stage: str, size: str, new, old=None, same=None):
        """Time ``new`` (and ``old``, after checking same(old(), new()) when given)."""
        if old is not None and same is not None and not same(old(), new()):
            raise SystemExit(f"{stage} at {size}: the old and the new implementation disagree")
        t_new = best_of(new, self.repeat)
        t_old = best_of(old, self.repeat) if old is not None else None
        cells = f" {t_old:8.4f} {t_old / t_new:7.1f}" if t_old is not None else ""
        print(f"{stage:32} {size:>28} {t_new:8.4f}{cells}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--assocs", default="10000,100000", help="association counts for the text stages")
    ap.add_argument("--jobs", default="5000,100000", help="pending job counts")
    ap.add_argument("--build", default="10000,100000,1000000", help="association counts for build_tree")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rep = Report(args.repeat)
    sizes = [int(s) for s in args.assocs.split(",") if s]
    job_counts = [int(s) for s in args.jobs.split(",") if s]
    cfg = {"priority_flags": []}

    for n in sizes:
        assocs = make_cluster(n)
        text = assoc_mgr_text(assocs)
        share = sshare_text(assocs)
        what = f"{n:,} assocs"
        rep.row("parse_assoc_mgr", what, lambda: parse_assoc_mgr(text), lambda: old.parse_assoc_mgr(text),
                lambda a, b: a == b)
        records = parse_assoc_mgr(text)
        rep.row("associations_from_assoc_mgr", what, lambda: associations_from_assoc_mgr(records))
        ours = associations_from_assoc_mgr(records)
        rep.row("parse_sshare (-a -l -P -m)", what, lambda: parse_sshare(share.splitlines(True), "sshare"),
                lambda: old.parse_sshare(share.splitlines(True), "sshare"), lambda a, b: a == b)
        shown = parse_sshare(share.splitlines(True), "sshare")
        ids_text = sshare_ids_text(assocs)

        def by_names():
            full = parse_sshare(share.splitlines(True), "sshare")
            tree_check_with_names(ours, full.associations)
            return full.reported_fairshare

        rep.row("sshare check (ID; old: names)", what,
                lambda: check_same_ids(records, ours, parse_sshare_ids(ids_text)), by_names,
                lambda a, b: a == b)
        reported = shown.reported_fairshare
        rep.row("order_of_22_05 (infer lft/name)", what,
                lambda: SlurmCli().order_of_22_05(ours, reported, ClusterSettings()),
                lambda: old.order_of_22_05(ours, reported, cfg), lambda a, b: a == b)
        rep.row("build_tree (assoc_mgr's order)", what, lambda: build_tree(ours),
                lambda: old.build_tree(ours), trees_equal)

    for n in job_counts:
        assocs = make_cluster(max(1000, min(n, 10000)))
        squeue, sprio = jobs_text(assocs, n)
        cmds = Canned(texts={"assoc_mgr": "", "sshare": "", "sshare_ids": "", "squeue": squeue, "sprio": sprio})
        what = f"{n:,} jobs"
        rep.row("parse_squeue", what, lambda: parse_squeue(squeue), lambda: old.parse_squeue(squeue),
                lambda a, b: a == b and [j.tres for j in a] == [j.tres for j in b])
        rep.row("parse_sprio_facts", what, lambda: parse_sprio_facts(sprio),
                lambda: old.parse_sprio_facts(sprio), lambda a, b: a == b)
        rep.row("read_jobs (squeue + sprio)", what, lambda: read_jobs(cmds, skipped=[]),
                lambda: old.read_jobs(cmds, skipped=[]),
                lambda a, b: a == b and [j.tres for j in a] == [j.tres for j in b])

    for n in [int(s) for s in args.build.split(",") if s]:
        what = f"{n:,} assocs"
        if n not in sizes:  # (else timed above, from the text)
            ours = make_cluster(n)  # too big for the text: the associations in list order, lft keys
            rep.row("build_tree (lft keys, reordered)", what, lambda: build_tree(ours),
                    lambda: old.build_tree(ours), trees_equal)
        plain = make_associations(n)  # benchmarks/engine.py's trees: no order, account usage from the users
        rep.row("build_tree (engine.py's trees)", what, lambda: build_tree(plain),
                lambda: old.build_tree(plain), trees_equal)

    for n_assocs, n_jobs in zip(sizes, job_counts):
        assocs = make_cluster(n_assocs)
        squeue, sprio = jobs_text(assocs, n_jobs)
        texts = {"assoc_mgr": assoc_mgr_text(assocs), "sshare": sshare_text(assocs),
                 "sshare_ids": sshare_ids_text(assocs), "squeue": squeue, "sprio": sprio}
        cmds, old_cmds = Canned(texts=texts), OldCanned(texts=texts)
        rep.row("SlurmCli.snapshot (whole pull)", f"{n_assocs:,} assocs, {n_jobs:,} jobs",
                lambda: cmds.snapshot(), lambda: old_cmds.snapshot(), snapshots_equal)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

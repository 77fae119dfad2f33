"""Push by association (push.mode assoc_priority) on a real Slurm, beside the per-job push measured in the same run.

On a private instance of the dev cluster set up for it (``deploy/dev-cluster/up --settings
assoc-priority``; the instance, the association tree and the pending jobs are
benchmarks/cycle_slurm.py's), the daemon's own Runner runs in ``assoc_priority`` mode:

* **cold start**: no association carries a value yet.  The first cycle writes every user
  association's Priority (those with pending jobs first); meanwhile ``sprio -o %i|%B`` is read
  every few seconds until every pending job's association term is its association's value.
  Target (issue 25): <= 60 s + one PriorityCalcPeriod from the cycle's start.
* **steady**: a cycle with unchanged inputs (writes nothing), then one after the shares of one
  top-level account changed (``sacctmgr modify account``): it must write exactly the associations
  whose value moved, counted from the two cycles' results.
* **cost**: slurmdbd's requests by type (``sacctmgr show stats``), rows and bytes added to
  slurmdbd's ``txn_table`` (MariaDB), slurmctld's RPCs (``sdiag``); another client's ``squeue`` and
  ``sacctmgr show assoc where users=<one user>`` latency during the cold start (median, max) and
  alone.
* **per job**, on the same cluster and jobs (``--per-job``, the default): a ``site_factor``
  Runner's first cycle, with the same probes: the figures of the README's per-job column.

* **request cost**: 20 requests of one association each, then one of 2,000 (the writer's cut):
  slurmdbd's cost of a request and of an association in it.

The per-cycle and per-day figures cost the churn of ``benchmarks/push_churn.py`` (associations whose
value moves per 5-minute cycle under usage decay, and the requests they take: one per distinct value)
with this run's request costs and txn_table bytes per row; the worst cold start is every association
written with every level in use.

    python benchmarks/assoc_slurm.py --quick                         # 1,000 associations, 500 jobs
    python benchmarks/assoc_slurm.py --associations 100000 --jobs 100000 --arrays 500 \\
        --submit-workers 6 --bulk                                  # the issue's size
    FAIRSHARED_SLURM_VERSION=25.11 python benchmarks/assoc_slurm.py ...   # another release

Needs root; the instance, its ports and its teardown are cycle_slurm.py's (--keep, --reuse the same).
Prints a table, the targets with PASS/FAIL, and one JSON line last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cycle_slurm as cs  # noqa: E402  (puts src/ and tests/ on sys.path)

from fairshared import __version__  # noqa: E402
from fairshared.daemon.config import config_from_dict  # noqa: E402
from fairshared.daemon.runner import Runner  # noqa: E402
from fairshared.daemon.wiring import make_source_and_updater  # noqa: E402
from fairshared.logs import configure as configure_logs  # noqa: E402
from fairshared.sinks.assoc_cli import SacctmgrAssocs  # noqa: E402
from fairshared.sinks.metrics import Metrics  # noqa: E402
from fairshared.slurm.config import parse_config, priority_config  # noqa: E402

CYCLES_PER_DAY = 288  # PriorityCalcPeriod 5 min, Slurm's default


class TimedAssocs(SacctmgrAssocs):
    """The daemon's association writer, recording each request: (seconds since ``t0``, argv[2:4], ids)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.t0 = time.monotonic()
        self.log: list[tuple[float, float, str, int]] = []  # (start, end, 'show'|'modify', ids)

    def _run(self, argv, what):
        start = time.monotonic() - self.t0
        try:
            return super()._run(argv, what)
        finally:
            ids = next((a.count(",") + 1 for a in argv if a.startswith("ids=")), 0)
            self.log.append((start, time.monotonic() - self.t0, argv[2], ids))


Probe = cs.Probe


def probe_commands(user: str) -> dict[str, list[str]]:
    return {"squeue": cs.SQUEUE_RUNNING,
            "sacctmgr": ["sacctmgr", "-nP", "show", "assoc", "where", f"users={user}", "format=account,user,priority"]}


def alone(env: dict, commands: dict[str, list[str]], repeat: int = 5) -> dict[str, float]:
    out = {}
    for name, argv in commands.items():
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            cs.run(argv, env)
            times.append(time.perf_counter() - t0)
        out[name] = round(statistics.median(times), 3)
    return out


def dbd_stats(env: dict) -> dict[str, int]:
    """slurmdbd's RPC counts by message type (``sacctmgr show stats``)."""
    out = {}
    for line in cs.run(["sacctmgr", "show", "stats"], env, check=False).stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith("DBD_") and "count:" in line:
            try:
                out[parts[0]] = int(line.split("count:")[1].split()[0])
            except (IndexError, ValueError):
                pass
    return out


def txn_rows(env: dict) -> tuple[int, int]:
    """Rows in slurmdbd's txn_table and their bytes (its text columns, and 24 for id, timestamp, action)."""
    out = cs.mariadb(env, "SELECT COUNT(*), COALESCE(SUM(LENGTH(CONCAT_WS('', name, actor, info, cluster)) + 24), 0) "
                          "FROM txn_table;").split()
    return int(out[0]), int(out[1])


def usage_pairs(lay, n: int) -> list[tuple[str, str]]:
    unix = set(lay.unix)
    return [p for p in lay.pairs if p[0] in unix][::7][:n]


def run_usage_jobs(lay, env: dict, n: int) -> None:
    """``n`` running jobs of different sizes on different users' associations (partitions still up),
    so that usage grows at every decay pass: the churn a steady cycle sees on a real cluster."""
    pairs = usage_pairs(lay, n)
    for i, (user, account) in enumerate(pairs):
        cs.run(["sbatch", "--parsable", f"--uid={user}", f"--account={account}", "--partition=debug",
                f"-n{8 * (i + 1)}", "--chdir=/tmp", "--output=/dev/null", "--job-name=fsb-usage",
                "--wrap", "sleep 7200"], env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        running = cs.run(["squeue", "-h", "-t", "R", "-n", "fsb-usage", "-o", "%i"], env).stdout.split()
        if len(running) >= len(pairs):
            break
        time.sleep(1)
    cs.log(f"{len(running)} jobs running (their usage grows at every decay pass)")


def wait_dbd_queue(env: dict, timeout: float = 900.0) -> None:
    """Wait until slurmctld has sent slurmdbd every job record of the submissions (sdiag's DBD Agent
    queue empty): a backlog would slow every slurmdbd request measured here."""
    deadline = time.monotonic() + timeout
    size = None
    while time.monotonic() < deadline:
        for line in cs.run(["sdiag"], env, check=False).stdout.splitlines():
            if line.strip().startswith("DBD Agent queue size:"):
                size = int(line.split(":")[1])
        if size == 0:
            return
        time.sleep(5)
    cs.log(f"warning: slurmctld's DBD agent queue still holds {size} messages")


def pending_jobs(env: dict) -> dict[str, tuple[str, str]]:
    """Pending job records: job id as sprio prints it (%A: an unsplit array's record) -> (account, user)."""
    out = {}
    for line in cs.run(["squeue", "-h", "-t", "PD", "-o", "%A|%a|%u"], env).stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            out[parts[0]] = (parts[1], parts[2])
    return out


def parse_terms(text: str) -> dict[str, int]:
    """``sprio -h -o %i|%B``: each job's association term of its priority (weighted; = Priority here)."""
    out = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 2:
            try:
                out[parts[0]] = int(float(parts[1]))
            except ValueError:
                pass
    return out


def expected_values(runner: Runner, writer: SacctmgrAssocs, cluster: str) -> dict[tuple[str, str], int]:
    """(account, user) -> the value the daemon's push state says it wrote."""
    rows = {r.id: r for r in writer.read(cluster)}
    return {(rows[i].account, rows[i].user): st.value for i, st in runner.state.assocs.items() if i in rows}


class ValuePoller:
    """``sprio -o %i|%B`` every ``every`` s in a thread from the cold start's beginning; judged once the
    values are known (:meth:`until_all`): the first time every job still pending carries its value."""

    def __init__(self, env: dict, jobs: dict[str, tuple[str, str]], t0: float, every: float = 3.0):
        self.env, self.jobs, self.t0, self.every = env, jobs, t0, every
        self.texts: list[tuple[float, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while not self.stop.is_set():
            out = cs.run(["sprio", "-h", "-o", "%i|%B"], self.env, check=False).stdout
            self.texts.append((time.monotonic() - self.t0, out))
            self.stop.wait(self.every)

    def _carrying(self, text: str, want: dict) -> tuple[int, int]:
        terms = parse_terms(text)
        listed = [j for j in self.jobs if j in terms]  # sprio lists only the jobs still pending
        return sum(1 for j in listed if terms[j] == want.get(self.jobs[j])), len(listed)

    def until_all(self, want: dict, deadline: float) -> tuple[float | None, list]:
        """Seconds since ``t0`` until every pending job's %B is its association's value (None: not by
        ``deadline`` s), and the progress [(seconds, jobs carrying it)]."""
        progress, seen = [], 0
        try:
            while True:
                texts = self.texts[seen:]
                seen += len(texts)
                for t, text in texts:
                    ok, listed = self._carrying(text, want)
                    progress.append((round(t, 1), ok))
                    if listed and ok == listed:
                        return t, progress
                if time.monotonic() - self.t0 > deadline:
                    return None, progress
                time.sleep(self.every)
        finally:
            self.stop.set()
            self.thread.join()
            self.texts.clear()


def cycle(runner: Runner, env: dict, label: str, probe_user: str | None = None) -> dict:
    rpcs, dbd, txn = cs.sdiag_rpcs(env), dbd_stats(env), txn_rows(env)
    t0 = time.monotonic()
    if probe_user:
        with Probe(env, probe_commands(probe_user)) as probe:
            res = runner.cycle(label)
        probes = probe.summary()
    else:
        res, probes = runner.cycle(label), None
    wall = time.monotonic() - t0
    txn_after = txn_rows(env)
    dbd_after = dbd_stats(env)
    return {"label": label, "outcome": res.outcome, "error": res.error, "blocked": res.blocked,
            "seconds": {k: round(v, 3) for k, v in res.seconds.items()}, "wall": round(wall, 2),
            "planned_assocs": len(res.assoc_actions), "assocs_written": res.assoc_written,
            "planned_jobs": len(res.actions), "jobs_pushed": res.pushed,
            "pending_assocs": sum(1 for a in res.assoc_actions if a.pending_jobs),
            "slurmctld_rpcs": cs.rpc_delta(rpcs, cs.sdiag_rpcs(env), top=5),
            "slurmdbd_rpcs": cs.rpc_delta(dbd, dbd_after, top=5),
            "txn_rows": txn_after[0] - txn[0], "txn_bytes": txn_after[1] - txn[1],
            "probes": probes, "algorithm": res.algorithm, "result": res}


def steady_cycle(runner: Runner, writer: TimedAssocs, env: dict, label: str) -> dict:
    """A cycle on a cluster already carrying its values: what it writes, against what moved."""
    before = {i: st.value for i, st in runner.state.assocs.items()}
    writer.log.clear()
    c = cycle(runner, env, label)
    after = {i: st.value for i, st in runner.state.assocs.items()}
    return c | {"moved": moved(before, after), "requests": sum(1 for r in writer.log if r[2] == "modify"),
                "written_ids": sum(r[3] for r in writer.log if r[2] == "modify"),
                "write_seconds": round(sum(e - s for s, e, k, _ in writer.log if k == "modify"), 2)}


def request_cost(runner: Runner, writer: TimedAssocs, env: dict, single: int = 20, big: int = 2000) -> dict:
    """slurmdbd's cost of one request and of one association in it: ``single`` requests of one
    association each, then one of ``big`` associations (the writer's cut), each association set to
    its value + 1 (so that slurmdbd changes it; the instance is torn down afterwards)."""
    cluster = env["FAIRSHARED_CLUSTER_NAME"]
    rows = [r for r in writer.read(cluster) if r.user is not None and r.priority is not None]
    by_value: dict[int, list[int]] = {}
    for r in rows[single:]:
        by_value.setdefault(r.priority, []).append(r.id)
    value, ids = max(by_value.items(), key=lambda kv: len(kv[1]))
    ids = ids[:big]
    txn0 = txn_rows(env)
    t0 = time.perf_counter()
    for r in rows[:single]:
        writer.write(cluster, [r.id], r.priority + 1)
    per_request = (time.perf_counter() - t0) / single
    txn1 = txn_rows(env)
    t1 = time.perf_counter()
    writer.write(cluster, ids, value + 1)
    big_s = time.perf_counter() - t1
    txn2 = txn_rows(env)
    per_assoc = max(0.0, (big_s - per_request) / max(1, len(ids) - 1))
    # a txn_table row stores the request's where clause: bytes = a row's base + bytes per id
    row1 = (txn1[1] - txn0[1]) / max(1, txn1[0] - txn0[0])
    per_id = max(0.0, (txn2[1] - txn1[1] - row1) / max(1, len(ids) - 1))
    return {"one_association_request_s": round(per_request, 4), "big_request_ids": len(ids),
            "big_request_s": round(big_s, 3), "per_association_ms": round(1000 * per_assoc, 3),
            "txn_row_bytes": round(row1 - per_id), "txn_bytes_per_id": round(per_id, 1)}


def moved(before: dict[int, int], after: dict[int, int]) -> int:
    return sum(1 for i, v in after.items() if before.get(i) != v)


def calc_period(env: dict) -> float:
    """PriorityCalcPeriod in seconds, read as the daemon reads it (fairshared.slurm.config)."""
    raw = parse_config(cs.run(["scontrol", "show", "config"], env).stdout)
    return float(priority_config(raw)["calc_period_seconds"])


def make_runner(mode: str, state: str, env: dict, levels: int | None):
    push = {"mode": mode, "weight": 10000} | ({"levels": levels} if levels is not None else {})
    config = config_from_dict({"source": {"kind": "cli", "timeout": 300}, "push": push,
                               "logging": {"format": "json", "level": "warning"},
                               "state": {"directory": state}})
    source, updater = make_source_and_updater(config, demo=False)
    source.env = dict(env)
    updater.env = dict(env)
    writer = TimedAssocs(timeout=600, env=dict(env))
    metrics = Metrics(version=__version__, per_job=config.metrics.per_job, associations=config.metrics.associations)
    metrics.set_info(algorithm="cluster", source="cli", push_mode=mode, dry_run=False)
    return Runner(config, source, updater, metrics, state, assoc_writer=writer), writer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--associations", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=5_000)
    ap.add_argument("--quick", action="store_true", help="1000 associations, 500 jobs")
    ap.add_argument("--unix-users", type=int, default=50)
    ap.add_argument("--arrays", type=int, default=0, help="of the --jobs submissions, this many are arrays of 100")
    ap.add_argument("--submit-workers", type=int, default=3)
    ap.add_argument("--bulk", action="store_true", help="write the tree into slurmdbd's tables (cycle_slurm.py)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--no-per-job", dest="per_job", action="store_false",
                    help="skip the site_factor comparison")
    ap.add_argument("--usage-jobs", type=int, default=20,
                    help="jobs left running (partition up while submitted) so that usage moves (default 20)")
    ap.add_argument("--levels", type=int, default=None, help="push.levels (default: the daemon's)")
    args = ap.parse_args()
    if args.quick:
        args.associations, args.jobs = 1_000, 500
    if os.geteuid() != 0:
        sys.exit("assoc_slurm: needs root (the dev cluster, useradd, sbatch --uid)")
    env = cs.instance_env()
    cdir = Path(env["FAIRSHARED_CLUSTER_DIR"])
    configure_logs("json", "warning")
    t_start = time.monotonic()
    states = [tempfile.mkdtemp(prefix="fs-bench-state-") for _ in range(2)]
    report: dict = {"benchmark": "assoc_slurm", "date": time.strftime("%Y-%m-%d")}
    try:
        lay = cs.Layout(args.associations, args.unix_users, group=10 if args.associations <= 20_000 else 100)
        if not args.reuse and (cdir / "etc").exists():
            cs.log(f"purging the earlier instance in {cdir}")
            cs.remove_unix_users(env)
            cs.down(env, purge=True)
        cs.up(env, settings="assoc-priority")
        if not args.reuse:
            cs.make_unix_users(lay, env)
            (cs.bulk_tree if args.bulk else cs.build_tree)(lay, env)
            run_usage_jobs(lay, env, args.usage_jobs)
            for p in cs.PARTITIONS:
                cs.run(["scontrol", "update", f"partitionname={p}", "state=down"], env)
            cs.submit_jobs(lay, args.jobs, env, args.submit_workers, args.arrays)
        n_assoc = cs.wait_for("associations in sshare", lambda: cs.count_assocs(env), lay.total)
        n_jobs = cs.wait_for("pending jobs", lambda: cs.count_pending(env), args.jobs)
        period = calc_period(env)
        wait_dbd_queue(env)
        report |= {"slurm": cs.run(["scontrol", "--version"], env).stdout.strip(), "associations": n_assoc,
                   "pending_jobs": n_jobs, "priority_calc_period": period}
        cs.log(f"cluster ready: {n_assoc} associations, {n_jobs} pending jobs, PriorityCalcPeriod {period:g} s")
        probe_user = lay.unix[0]
        report["alone"] = alone(env, probe_commands(probe_user))

        runner, writer = make_runner("assoc_priority", states[0], env, args.levels)
        cs.log("cold start ...")
        jobs = pending_jobs(env)
        writer.t0 = t0 = time.monotonic()
        poller = ValuePoller(env, jobs, t0)
        cold = cycle(runner, env, "cold start", probe_user)
        want = expected_values(runner, writer, env["FAIRSHARED_CLUSTER_NAME"])
        pending_done = max((end for start, end, kind, ids in writer.log if kind == "modify"), default=0.0)
        pend_ids = cold["pending_assocs"]
        n_pend_req, pending_written_at = 0, 0.0
        for start, end, kind, ids in writer.log:  # the requests that wrote the associations with jobs
            if kind == "modify" and pend_ids > 0:
                pend_ids -= ids
                n_pend_req += 1
                pending_written_at = end
        cs.log(f"cold start: {cold['outcome']} in {cold['wall']} s, {cold['assocs_written']} associations "
               f"written; waiting for every pending job to carry its value")
        all_at, progress = poller.until_all(want, deadline=cold["wall"] + 3 * period + 60)
        cold |= {"requests": sum(1 for r in writer.log if r[2] == "modify"), "writes_done_at": round(pending_done, 1),
                 "pending_assocs_written_at": round(pending_written_at, 1), "pending_requests": n_pend_req,
                 "all_jobs_carry_value_at": None if all_at is None else round(all_at, 1),
                 "progress": [p for p in progress if p[1]][:3] + progress[-3:], "jobs_checked": len(jobs)}

        steady = []
        for label, wait in (("steady 1", 0.0), ("steady 2", period), ("steady 3", 0.0)):
            time.sleep(wait)  # one decay pass at least: the running jobs' usage moved
            if label == "steady 3":  # an admin resets the usage of 5 associations: their users move up
                for user, account in usage_pairs(lay, args.usage_jobs)[:5]:
                    cs.run(["sacctmgr", "-i", "modify", "user", "where", f"name={user}", f"account={account}",
                            "set", "rawusage=0"], env)
                time.sleep(2)
                label += " (5 usages reset)"
            steady.append(steady_cycle(runner, writer, env, label))
        cycles = [cold, *steady]
        report["request_cost"] = request_cost(runner, writer, env)

        per_job = None
        if args.per_job:
            runner2, _ = make_runner("site_factor", states[1], env, args.levels)
            cs.log("per-job (site_factor) first cycle ...")
            per_job = cycle(runner2, env, "site_factor 1st", probe_user)
            cycles.append(per_job)
        report["cycles"] = [{k: v for k, v in c.items() if k != "result"} for c in cycles]
        levels = args.levels if args.levels is not None else runner.config.push.levels
        report["targets"] = print_report(report, cycles, cold, steady, per_job, period, cold["algorithm"],
                                         levels, n_assoc)
        print(json.dumps(report), flush=True)
        return 0 if all(report["targets"].values()) else 1
    finally:
        for s in states:
            shutil.rmtree(s, ignore_errors=True)
        if args.keep:
            cs.log(f"kept: export SLURM_CONF={env['SLURM_CONF']}")
        else:
            cs.log("tearing the instance down")
            cs.remove_unix_users(env)
            cs.down(env, purge=True)
        cs.log(f"benchmark took {time.monotonic() - t_start:.1f} s")


def day_figures(report: dict, algorithm: str, levels: int, n_assoc: int, pending_assocs: int) -> dict:
    """Per cycle and per day at the churn of :func:`push_churn.churn` (this algorithm, these levels,
    as many associations), costed with this run's request costs and txn_table bytes."""
    from push_churn import churn

    rc = report["request_cost"]
    if algorithm not in ("classic", "fair_tree", "level_based"):
        algorithm = "fair_tree"
    ch = churn(n_assoc, report["pending_jobs"], 6, [levels], algorithms=(algorithm,))[0]
    users = round(ch["assoc_writes_per_cycle_mean"] / ch["assoc_share_mean"]) if ch["assoc_share_mean"] else n_assoc
    cost = lambda req, n: req * rc["one_association_request_s"] + n * rc["per_association_ms"] / 1000  # noqa: E731
    size = lambda req, n: req * rc["txn_row_bytes"] + n * rc["txn_bytes_per_id"]  # noqa: E731
    values = min(levels + 1, users) if levels else users
    worst_req = values + users // 2000
    pend_req = min(values, pending_assocs) + pending_assocs // 2000
    req, writes = ch["assoc_requests_per_cycle_mean"], ch["assoc_writes_per_cycle_mean"]
    return {"algorithm": algorithm, "levels": levels, "user_assocs": users,
            "worst_cold_start_requests": worst_req, "worst_cold_start_s": round(cost(worst_req, users), 1),
            "worst_pending_first_s": round(cost(pend_req, pending_assocs), 1),
            "assoc_writes_per_cycle": writes, "requests_per_cycle": req,
            "slurmdbd_s_per_cycle": round(cost(req, writes), 2),
            "requests_per_day": round(CYCLES_PER_DAY * req),
            "txn_mb_per_day": round(CYCLES_PER_DAY * size(req, writes) / 1e6, 2)}


def print_report(report, cycles, cold, steady, per_job, period, algorithm, levels, n_assoc) -> dict[str, bool]:
    w = sys.stdout.write
    w(f"\n{report['slurm']}: {report['associations']} associations, {report['pending_jobs']} pending jobs, "
      f"PriorityCalcPeriod {period:g} s\n\n")
    w(f"{'':34}" + "".join(f"{c['label']:>26}" for c in cycles) + "\n")
    rows = [("outcome", lambda c: c["outcome"]), ("wall (s)", lambda c: f"{c['wall']:.1f}"),
            ("push stage (s)", lambda c: f"{c['seconds'].get('push', 0):.1f}"),
            ("pull stage (s)", lambda c: f"{c['seconds'].get('pull', 0):.1f}"),
            ("associations written", lambda c: c["assocs_written"]),
            ("sacctmgr modify requests", lambda c: c.get("requests", "-")),
            ("job updates", lambda c: c["jobs_pushed"]),
            ("slurmdbd txn_table rows / bytes", lambda c: f"{c['txn_rows']} / {c['txn_bytes']}"),
            ("squeue meanwhile med/max (s)", lambda c: _probe(c, "squeue")),
            ("sacctmgr meanwhile med/max (s)", lambda c: _probe(c, "sacctmgr"))]
    for name, fn in rows:
        w(f"{name:34}" + "".join(f"{str(fn(c)):>26}" for c in cycles) + "\n")
    w("slurmctld RPCs (sdiag):\n" + "".join(f"  {c['label']}: {c['slurmctld_rpcs']}\n" for c in cycles))
    w("slurmdbd RPCs (sacctmgr show stats):\n" + "".join(f"  {c['label']}: {c['slurmdbd_rpcs']}\n" for c in cycles))
    w(f"alone: {report['alone']}\n")
    w(f"cold start: associations with pending jobs written at {cold['pending_assocs_written_at']} s "
      f"({cold['pending_assocs']} in {cold['pending_requests']} requests), all written at "
      f"{cold['writes_done_at']} s, every pending job ({cold['jobs_checked']}) carries its value at "
      f"{cold['all_jobs_carry_value_at']} s (progress {cold['progress']})\n")
    for c in steady:
        w(f"{c['label']}: {c['moved']} associations moved, {c['written_ids']} written in {c['requests']} "
          f"requests ({c['write_seconds']} s)\n")
    rc = report["request_cost"]
    w(f"request cost: {rc['one_association_request_s']} s a request of one association; "
      f"{rc['big_request_ids']} in one request {rc['big_request_s']} s ({rc['per_association_ms']} ms an association); "
      f"a txn_table row {rc['txn_row_bytes']} bytes + {rc['txn_bytes_per_id']} per id\n")
    report["per_day"] = []
    for lv in sorted({levels, 100}, reverse=True):
        d = day_figures(report, algorithm, lv, n_assoc, cold["pending_assocs"])
        report["per_day"].append(d)
        w(f"levels {lv}: worst cold start ({min(lv + 1, d['user_assocs'])} distinct values, all "
          f"{d['user_assocs']} associations) {d['worst_cold_start_requests']} requests, ~{d['worst_cold_start_s']:.0f} s "
          f"of sacctmgr, the {cold['pending_assocs']} with pending jobs first in ~{d['worst_pending_first_s']:.0f} s; "
          f"per 5-min cycle at {d['algorithm']}'s churn (benchmarks/push_churn.py) {d['assoc_writes_per_cycle']} "
          f"associations in {d['requests_per_cycle']} requests, ~{d['slurmdbd_s_per_cycle']:.1f} s of sacctmgr; "
          f"per day {d['requests_per_day']:,} txn_table rows, {d['txn_mb_per_day']:.1f} MB\n")
    all_at = cold["all_jobs_carry_value_at"]
    targets = {
        "cold start: every pending job carries its value <= 60 s + PriorityCalcPeriod":
            all_at is not None and all_at <= 60 + period,
        "steady: each cycle writes exactly the associations whose value moved":
            all(c["written_ids"] == c["moved"] == c["assocs_written"] for c in steady),
        "no job update in assoc_priority mode": all(c["jobs_pushed"] == 0 for c in [cold, *steady]),
        "every assoc_priority cycle succeeded": all(c["outcome"] == "success" for c in [cold, *steady]),
    }
    for name, ok in targets.items():
        w(f"target {name}: {'PASS' if ok else 'FAIL'}\n")
    if per_job:
        w(f"per job: first cycle {per_job['wall']:.1f} s, {per_job['jobs_pushed']} job updates; assoc_priority "
          f"cold start {cold['wall']:.1f} s ({cold['wall'] / per_job['wall']:.2f} x)\n")
    sys.stdout.flush()
    return targets


def _probe(c, name):
    p = (c.get("probes") or {}).get(name)
    return f"{p['median']}/{p['max']}" if p and p["n"] else "-"


if __name__ == "__main__":
    sys.exit(main())

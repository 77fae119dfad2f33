"""One full daemon cycle against a real Slurm 22.05 cluster: 10,000 associations, 5,000 pending jobs.

Brings up a private instance of the dev cluster (deploy/dev-cluster/up with its own
directory, cluster name and ports, so the default instance other tests use is never
touched), builds the association tree with batched ``sacctmgr`` calls, submits the
pending jobs (to partitions set DOWN, so they stay PENDING with a normal, non-zero
priority), then runs the daemon's own Runner (command-line source, ``scontrol``
updater, metrics as the daemon builds them, push state in a temporary directory) in
``site_factor`` mode:

* cycle 1 pushes a SiteFactor to every pending job (that push is part of the measure);
* cycle 2 has unchanged inputs and should push nothing.

It prints each cycle's seconds per stage (pull, compute, push, publish), the pull's
Slurm commands, the wall time of ``sshare -a -l -P`` on the same cluster (best of 3)
and the ratio (pull + compute) / sshare measured in the same run, as a table and as
one JSON line (last line of stdout).

Targets (issue 19): first cycle <= 60 s, an unchanged cycle <= 1.2 x sshare, pull + compute
<= 1.5 x sshare, peak RSS <= 1 GiB (of this process, which runs the daemon's Runner); it also
prints slurmctld's RPC counts per cycle (sdiag) and another client's squeue latency during it.
At 100,000 associations and jobs: --associations 100000 --jobs 100000 --arrays 500
--submit-workers 6 (MaxJobCount is 200,000 on the dev cluster).
Measured on the 2-core dev VM (shared; figures move by ~30% with the neighbours' load):
cycle 1 6.1 s, of it the push 4.1 s (jobs that get the same value share one
`scontrol update JobId=a,b,...`; with one call per job it was 18-34 s, 3.7-6 ms a job);
pull + compute 1.9-3.7 s = 1.6-2.4 x sshare (1.1-1.5 s); cycle 2 1.8-2.6 s, nothing pushed.
2026-11-24 (22.05.8): cycle 1 7.3 s (push 3.6 s), pull + compute 3.6 s = 2.11 x sshare (1.71 s),
of the pull 2.1 s in Slurm's commands; cycle 2 3.7 s.
The whole run takes ~3.5 min, most of it building the associations in slurmdbd.  Each
``sacctmgr add user`` call costs slurmdbd time in proportion to the associations already there
(25.11.7, 370 associations a call: 0.5 s at the start, 1.9 s at 19,000), so the build is
quadratic in the number of calls: 20,000 associations took 103 s in calls of 10 accounts and
27 s in calls of 100 (--group), 100,000 took 460 s in calls of 100.  22.05's slurmdbd stays at
about 13 associations a second however the calls are cut, so --bulk writes the same tree straight
into slurmdbd's MariaDB tables and restarts slurmctld: 100,000 associations in 16 s (22.05.8).

    python benchmarks/cycle_slurm.py                # 10,000 associations, 5,000 jobs
    python benchmarks/cycle_slurm.py --quick        # 1,000 associations, 500 jobs
    python benchmarks/cycle_slurm.py --keep         # leave the instance (and its users) up
    python benchmarks/cycle_slurm.py --reuse --keep # measure again on a kept instance
    python benchmarks/cycle_slurm.py --associations 100000 --jobs 100000 --arrays 500 \
        --submit-workers 6 --bulk                  # the largest sites, on any release

Needs root (the cluster, ``useradd``, ``sbatch --uid``).  The instance is set by
FAIRSHARED_CLUSTER_DIR / _NAME / _SLURMCTLD_PORT / _SLURMD_PORT / _SLURMDBD_PORT /
_MARIADB_PORT when they are set, else by the defaults below (/var/tmp/fs-bench,
fsbench, 6917-6919, 3407); it refuses the default instance's directory and ports.
Without --reuse an existing instance in that directory is purged first; at the end
it is torn down (``down --purge``) and the Unix users it created are removed, unless
--keep.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pwd
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))


from fairshared import __version__  # noqa: E402
from fairshared.daemon.config import config_from_dict  # noqa: E402
from fairshared.logs import configure as configure_logs  # noqa: E402
from fairshared.daemon.runner import Runner  # noqa: E402
from fairshared.daemon.wiring import make_source_and_updater  # noqa: E402
from fairshared.sinks.metrics import Metrics  # noqa: E402
from slurm_cluster import add_unix_user  # noqa: E402

SCRIPTS = ROOT / "deploy" / "dev-cluster"

# This benchmark's own instance (never the default one: /var/tmp/fairshared-cluster, 6817-6819, 3307).
INSTANCE_DEFAULTS = {
    "FAIRSHARED_CLUSTER_DIR": "/var/tmp/fs-bench",
    "FAIRSHARED_CLUSTER_NAME": "fsbench",
    "FAIRSHARED_SLURMCTLD_PORT": "6917",
    "FAIRSHARED_SLURMD_PORT": "6918",
    "FAIRSHARED_SLURMDBD_PORT": "6919",
    "FAIRSHARED_MARIADB_PORT": "3407",
    # ports of its own: it runs beside the test cluster instead of stopping it (up's one-at-a-time rule)
    "FAIRSHARED_CLUSTER_ACTIVE": "/var/tmp/fs-bench.active",
}
FORBIDDEN = {"FAIRSHARED_CLUSTER_DIR": "/var/tmp/fairshared-cluster", "FAIRSHARED_SLURMCTLD_PORT": "6817",
             "FAIRSHARED_SLURMD_PORT": "6818", "FAIRSHARED_SLURMDBD_PORT": "6819",
             "FAIRSHARED_MARIADB_PORT": "3307"}

# Slurm client variables that would change what the commands print (as tests/slurm_cluster.py strips them)
SLURM_ENV_PREFIXES = ("SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_", "SACCT_", "SACCTMGR_",
                      "SPRIO_", "SSHARE_", "SCONTROL_", "SREPORT_", "SSTAT_")

PARTITIONS = ("debug", "high")
USER_PREFIX = "fsbu"  # user names: fsbu0000 ...
UNIX_USERS_FILE = "bench-unix-users.txt"  # in the cluster dir: the Unix users this benchmark created


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- the instance ---------------------------------------------------------------------------------

def instance_env() -> dict[str, str]:
    inst = {k: os.environ.get(k) or v for k, v in INSTANCE_DEFAULTS.items()}
    for k, bad in FORBIDDEN.items():
        if inst[k].rstrip("/") == bad:
            sys.exit(f"cycle_slurm: refusing {k}={inst[k]}: that is the default dev-cluster instance "
                     f"other tests use; give this benchmark its own (see --help)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(SLURM_ENV_PREFIXES)}
    env.update(inst)
    env["SLURM_CONF"] = str(Path(inst["FAIRSHARED_CLUSTER_DIR"]) / "etc" / "slurm.conf")
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    for d in ("/usr/sbin", "/sbin"):
        if d not in env["PATH"].split(":"):
            env["PATH"] += ":" + d
    return env


def run(argv: list, env: dict, timeout: float = 600.0, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, errors="replace")
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv[:6]))}{' ...' if len(argv) > 6 else ''} exited "
                           f"{proc.returncode}: {(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc


def up(env: dict, settings: str | None = None) -> None:
    extra = ["--settings", settings] if settings else []
    proc = run([SCRIPTS / "up", "--dir", env["FAIRSHARED_CLUSTER_DIR"], *extra, "--quiet"], env,
               timeout=900, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"deploy/dev-cluster/up failed:\n{(proc.stderr or proc.stdout)[-3000:]}")
    for line in proc.stdout.splitlines():
        if line.startswith("export SLURM_CONF="):
            env["SLURM_CONF"] = line.split("=", 1)[1].strip()
        elif line.startswith("export PATH="):  # a release built from source: its own commands first
            env["PATH"] = line.split("=", 1)[1].strip().replace("$PATH", env["PATH"])


def down(env: dict, purge: bool = True) -> None:
    argv = [SCRIPTS / "down", "--dir", env["FAIRSHARED_CLUSTER_DIR"]] + (["--purge"] if purge else [])
    proc = run(argv, env, timeout=300, check=False)
    if proc.returncode != 0:
        log(f"down failed: {(proc.stderr or proc.stdout).strip()[-1000:]}")


def remove_unix_users(env: dict) -> None:
    f = Path(env["FAIRSHARED_CLUSTER_DIR"]) / UNIX_USERS_FILE
    if not f.exists():
        return
    names = [n for n in f.read_text().split() if n.startswith(USER_PREFIX)]
    for name in names:
        # its jobs still running (the instance goes down after this): userdel refuses a user with processes
        subprocess.run(["pkill", "-KILL", "-u", name], env=env, capture_output=True, check=False)
        for _ in range(20):
            p = subprocess.run(["userdel", name], env=env, capture_output=True, text=True, check=False)
            if p.returncode != 10:  # 10: /etc/passwd locked by someone else's useradd: retry
                break
            time.sleep(0.2)
    f.unlink()
    log(f"removed {len(names)} Unix users")


# --- the workload ---------------------------------------------------------------------------------

class Layout:
    """Accounts in 3 levels and user associations on the leaves, sized to ``associations`` in total
    (counting root's account and root/root, as ``sshare -a`` lists them)."""

    def __init__(self, associations: int, unix_users: int, group: int = 10, per_user_groups: int = 2):
        self.leaves_wanted = max(4, associations // 40)
        self.n_top = max(2, min(8, self.leaves_wanted // 32))
        self.n_mid = self.n_top * 4
        per_mid = math.ceil(self.leaves_wanted / self.n_mid)
        self.top = [f"t{i}" for i in range(self.n_top)]
        # children in creation order, contiguous per parent: creation order = slurmdbd's tree
        # (lft) order, and the user associations below are added left to right.  slurmdbd keeps
        # the tree as nested sets and a new association shifts lft/rgt of every row to its right,
        # so filling the leaves left to right keeps each insert cheap (in any other order the
        # build is quadratic: ~10 min instead of ~1 for 10,000 associations on 2 cores)
        self.mid = {f"m{i}": self.top[i // 4] for i in range(self.n_mid)}
        self.leaf = {f"l{i}": f"m{i // per_mid}" for i in range(self.n_mid * per_mid)}
        accounts = self.n_top + self.n_mid + len(self.leaf)
        n_user_assocs = associations - 2 - accounts
        if n_user_assocs < len(self.leaf):
            raise SystemExit(f"--associations {associations} is too small for {accounts} accounts")
        # leaf groups of `group` accounts; each gets a window of users (one sacctmgr call per
        # group = users x accounts), windows of neighbouring groups overlap so that every user
        # has associations in about per_user_groups * group accounts
        leaves = list(self.leaf)
        self.groups = [leaves[i:i + group] for i in range(0, len(leaves), group)]
        quota = [n_user_assocs * len(g) // len(leaves) for g in self.groups]
        quota[-1] += n_user_assocs - sum(quota)
        k_avg = n_user_assocs / len(leaves)
        self.n_users = max(unix_users, int(round(k_avg * len(self.groups) / per_user_groups)))
        self.users = [f"{USER_PREFIX}{i:04d}" for i in range(self.n_users)]
        self.batches: list[tuple[list[str], list[str]]] = []  # (users, accounts): cross products
        self.pairs: list[tuple[str, str]] = []  # (user, account)
        step = max(1, self.n_users // len(self.groups))
        for g, (accts, q) in enumerate(zip(self.groups, quota)):
            k, extra = divmod(q, len(accts))
            window = [self.users[(g * step + j) % self.n_users] for j in range(min(self.n_users, k + 1))]
            if k:
                self.batches.append((window[:k], accts))
            if extra:  # the remainder: k+1-th user of the window... on the first `extra` accounts
                self.batches.append(([window[min(k, len(window) - 1)]], accts[:extra]))
        for users, accts in self.batches:
            self.pairs += [(u, a) for u in users for a in accts]
        if len(set(self.pairs)) != len(self.pairs):
            raise SystemExit("internal error: duplicate user associations in the layout")
        # the Unix users (they submit the jobs): spread over the pool
        stride = self.n_users / unix_users
        self.unix = sorted({self.users[int(i * stride)] for i in range(unix_users)})
        self.accounts = accounts
        self.total = 2 + accounts + len(self.pairs)


def build_tree(lay: Layout, env: dict) -> None:
    """The tree of :func:`tree_rows` through sacctmgr: one call per parent's accounts, one per batch."""
    t0 = time.monotonic()
    accounts, users = tree_rows(lay)
    run(["sacctmgr", "-i", "add", "account", ",".join(lay.top), "parent=root", "fairshare=100"], env)
    by_parent: dict[str, list[str]] = {}
    for child, parent in list(lay.mid.items()) + list(lay.leaf.items()):
        by_parent.setdefault(parent, []).append(child)
    for parent in list(lay.top) + list(lay.mid):  # mids before leaves
        kids = by_parent.get(parent, [])
        if kids:  # shares differ per batch so the tree is not uniform
            run(["sacctmgr", "-i", "add", "account", ",".join(kids), f"parent={parent}",
                 f"fairshare={accounts[kids[0]][1]}"], env)
    log(f"{lay.accounts} accounts in {time.monotonic() - t0:.1f} s")
    t1 = time.monotonic()
    done = 0
    for i, (batch, accts) in enumerate(lay.batches):
        run(["sacctmgr", "-i", "add", "user", ",".join(batch), f"account={','.join(accts)}",
             f"fairshare={users[done][2]}"], env)
        done += len(batch) * len(accts)
        if (i + 1) % 10 == 0:
            log(f"  {done} of {len(lay.pairs)} user associations ({time.monotonic() - t1:.0f} s)")
    log(f"{len(lay.pairs)} user associations in {len(lay.batches)} sacctmgr calls, "
        f"{time.monotonic() - t1:.1f} s")


def tree_rows(lay: Layout) -> tuple[dict[str, tuple[str, int]], list[tuple[str, str, int]]]:
    """The tree :func:`build_tree` creates, as data: {account: (parent, shares)} in creation order and
    [(user, account, shares)] in creation order (the same random shares, drawn in the same order)."""
    rnd = random.Random(1)
    accounts = {a: ("root", 100) for a in lay.top}
    by_parent: dict[str, list[str]] = {}
    for child, parent in list(lay.mid.items()) + list(lay.leaf.items()):
        by_parent.setdefault(parent, []).append(child)
    for parent in list(lay.top) + list(lay.mid):
        kids = by_parent.get(parent, [])
        if kids:
            shares = rnd.choice((1, 2, 5, 10, 20, 50))
            accounts.update((k, (parent, shares)) for k in kids)
    users = []
    for us, accts in lay.batches:
        shares = rnd.choice((1, 1, 1, 2, 3, 10))
        users += [(u, a, shares) for u in us for a in accts]
    return accounts, users


def mariadb(env: dict, sql: str) -> str:
    """Run ``sql`` in the instance's slurmdbd database as MariaDB's root (tab-separated output)."""
    cnf = Path(env["FAIRSHARED_CLUSTER_DIR"]) / "etc" / "my.cnf"
    db = subprocess.run(["mariadb", f"--defaults-file={cnf}", "-u", "root", "-N", "fairshared_slurm_acct_db"],
                        input=sql, capture_output=True, text=True, env=env, timeout=900)
    if db.returncode != 0:
        raise RuntimeError(f"MariaDB: {db.stderr.strip()[-2000:]}")
    return db.stdout


def bulk_tree(lay: Layout, env: dict) -> None:
    """The tree of :func:`tree_rows` written straight into slurmdbd's tables, then slurmctld
    restarted to load it: for 22.05, whose slurmdbd adds about 13 associations a second through
    sacctmgr (100,000 would take two hours).  The rows are what sacctmgr writes, each user's first
    association its default: before 23.11 a nested set (``lft``/``rgt``), from 23.11 ``lineage``
    (``/a/b/``, ``/a/b/0-user/``) and ``id_parent`` (as_mysql_assoc.c ``_set_lineage``)."""
    t0 = time.monotonic()
    table = f"{env['FAIRSHARED_CLUSTER_NAME']}_assoc_table"
    lineage = bool(mariadb(env, f"SHOW COLUMNS FROM {table} LIKE 'lineage';").strip())
    accounts, users = tree_rows(lay)
    kids: dict[str, list] = {"root": []}
    for a, (parent, _) in accounts.items():
        kids.setdefault(parent, []).append(("acct", a))
        kids.setdefault(a, [])
    for u, a, shares in users:
        kids[a].append(("user", u, shares))
    kids["root"].append(("user", "root", 1))
    # one dict per row: id_assoc, user, acct, parent_acct, id_parent, lineage, lft, rgt, shares, is_def, qos
    rows: list[dict] = []
    seen_user: set[str] = set()
    counter = 0

    def walk(acct: str, parent: str, shares: int, parent_id: int, path: str) -> None:  # depth 4
        nonlocal counter
        counter += 1
        row = {"id_assoc": len(rows) + 1, "user": "", "acct": acct, "parent_acct": parent,
               "id_parent": parent_id, "lineage": path, "lft": counter, "shares": shares, "is_def": 0,
               "qos": ",1," if acct == "root" else ""}
        rows.append(row)
        for kid in kids[acct]:
            if kid[0] == "acct":
                walk(kid[1], acct, accounts[kid[1]][1], row["id_assoc"], f"{path}{kid[1]}/")
            else:
                counter += 2
                rows.append({"id_assoc": len(rows) + 1, "user": kid[1], "acct": acct, "parent_acct": "",
                             "id_parent": row["id_assoc"], "lineage": f"{path}0-{kid[1]}/",
                             "lft": counter - 1, "rgt": counter, "shares": kid[2],
                             "is_def": int(kid[1] not in seen_user), "qos": ""})
                seen_user.add(kid[1])
        counter += 1
        row["rgt"] = counter

    walk("root", "", 1, 0, "/")
    cols = ["id_assoc", "user", "acct", "parent_acct", "shares", "is_def", "qos"]
    cols += ["id_parent", "lineage"] if lineage else ["lft", "rgt"]
    now = int(time.time())
    q = "'{}'".format
    sql = ["SET autocommit=0;", f"DELETE FROM {table};"]
    for i in range(0, len(rows), 5000):
        values = ",".join(f"({now},{now},0," + ",".join(q(r[c]) if isinstance(r[c], str) else str(r[c])
                                                         for c in cols) + ")" for r in rows[i:i + 5000])
        sql.append(f"INSERT INTO {table} (creation_time, mod_time, deleted, {', '.join(cols)}) "
                   f"VALUES {values};")
    names = sorted({u for u, _, _ in users})
    for i in range(0, len(names), 5000):
        sql.append("INSERT IGNORE INTO user_table (creation_time, mod_time, deleted, name, admin_level) "
                   "VALUES " + ",".join(f"({now},{now},0,{q(n)},1)" for n in names[i:i + 5000]) + ";")
    accts = list(accounts)
    for i in range(0, len(accts), 5000):
        sql.append("INSERT IGNORE INTO acct_table (creation_time, mod_time, deleted, name, description, "
                   "organization) VALUES " + ",".join(f"({now},{now},0,{q(a)},{q(a)},{q(a)})"
                                                       for a in accts[i:i + 5000]) + ";")
    sql.append("COMMIT;")
    mariadb(env, "\n".join(sql))
    log(f"{len(rows)} associations written into {table} ({'lineage' if lineage else 'lft/rgt'}) "
        f"in {time.monotonic() - t0:.1f} s")
    t1 = time.monotonic()
    run([SCRIPTS / "restart-ctld", "--dir", env["FAIRSHARED_CLUSTER_DIR"], "--quiet"], env, timeout=900)
    log(f"slurmctld restarted and loaded them in {time.monotonic() - t1:.1f} s")


def make_unix_users(lay: Layout, env: dict) -> None:
    created = []
    f = Path(env["FAIRSHARED_CLUSTER_DIR"]) / UNIX_USERS_FILE
    for name in lay.unix:
        try:
            pwd.getpwnam(name)
            continue
        except KeyError:
            pass
        add_unix_user(name)
        created.append(name)
        with open(f, "a") as fh:  # recorded as we go: teardown removes exactly these
            fh.write(name + "\n")
    log(f"{len(lay.unix)} Unix users ({len(created)} created)")


TRANSIENT = ("Socket timed out", "Resource temporarily unavailable", "temporarily unable")


def submit_jobs(lay: Layout, jobs: int, env: dict, workers: int = 3, arrays: int = 0) -> None:
    unix = set(lay.unix)
    assocs = [p for p in lay.pairs if p[0] in unix]
    random.Random(2).shuffle(assocs)
    if not assocs:
        raise SystemExit("no association of a Unix user to submit jobs with")

    def one(i: int) -> None:
        user, account = assocs[i % len(assocs)]
        # the first `arrays` submissions are job arrays of 100 tasks: one pending record each until
        # tasks are split off (as on a real cluster, most of a big queue's jobs are array tasks)
        array = ["--array=0-99"] if i < arrays else []
        argv = ["sbatch", "--parsable", *array, f"--uid={user}", f"--account={account}",
                f"--partition={PARTITIONS[i % len(PARTITIONS)]}", f"-n{1 + i % 8}", "--chdir=/tmp",
                "--output=/dev/null", f"--job-name=fsb{i}", "--wrap", "sleep 60"]
        for attempt in range(6):
            proc = run(argv, env, timeout=120, check=False)
            if proc.returncode == 0:
                return
            # a busy slurmctld (22.05 past ~70,000 jobs) times some submissions out: try again later
            # (one that timed out may have been queued all the same: the queue is then a job longer)
            if not any(t in proc.stderr for t in TRANSIENT) or attempt == 5:
                raise RuntimeError(f"sbatch ... --job-name=fsb{i} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
            time.sleep(2 ** attempt)

    t0 = time.monotonic()
    with ThreadPoolExecutor(workers) as ex:
        for n, _ in enumerate(ex.map(one, range(jobs)), start=1):
            if n % 1000 == 0:
                log(f"  {n} jobs submitted ({time.monotonic() - t0:.1f} s)")
    log(f"{jobs} jobs submitted from {len(unix)} users on {len(assocs)} associations "
        f"in {time.monotonic() - t0:.1f} s")


def count_assocs(env: dict) -> int:
    return sum(1 for ln in run(["sshare", "-a", "-P", "-n"], env).stdout.splitlines() if ln.strip())


def count_pending(env: dict) -> int:
    out = run(["squeue", "-h", "-t", "PD", "-o", "%A %Q"], env).stdout.split("\n")
    return sum(1 for ln in out if ln.strip() and ln.split()[1] != "0")


def wait_for(what: str, fn, want: int, timeout: float = 120.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        have = fn()
        if have >= want or time.monotonic() > deadline:
            if have < want:
                log(f"warning: {what}: {have}, expected {want}")
            return have
        time.sleep(1)


# --- the measures -----------------------------------------------------------------------------------

def sdiag_rpcs(env: dict) -> dict[str, int]:
    """slurmctld's RPC counts by message type (``sdiag``'s "by message type" section)."""
    out, on = {}, False
    for line in run(["sdiag"], env, check=False).stdout.splitlines():
        if "by message type" in line:
            on = True
        elif on and "by user" in line:
            break
        elif on and "count:" in line:
            name = line.split()[0]
            try:
                out[name] = int(line.split("count:")[1].split()[0])
            except (IndexError, ValueError):
                pass
    return out


def rpc_delta(before: dict[str, int], after: dict[str, int], top: int = 6) -> list[tuple[str, int]]:
    d = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    return sorted(((k, v) for k, v in d.items() if v > 0), key=lambda kv: -kv[1])[:top]


class Probe:
    """Another client: each argv run in turn every ``every`` s in a thread while a cycle runs, wall
    times kept per name (``squeue``'s latency here; benchmarks/assoc_slurm.py adds sacctmgr's)."""

    def __init__(self, env: dict, commands: dict[str, list[str]], every: float = 0.5):
        import threading
        self.env, self.commands, self.every = env, commands, every
        self.times: dict[str, list[float]] = {k: [] for k in commands}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self.stop.is_set():
            for name, argv in self.commands.items():
                t0 = time.perf_counter()
                run(argv, self.env, check=False)
                self.times[name].append(time.perf_counter() - t0)
            self.stop.wait(self.every)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def summary(self) -> dict[str, dict]:
        import statistics
        return {k: {"n": len(t), "median": round(statistics.median(t), 3) if t else None,
                    "max": round(max(t), 3) if t else None} for k, t in self.times.items()}


SQUEUE_RUNNING = ["squeue", "-h", "-t", "R", "-o", "%i"]


def peak_rss_mib() -> float:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

def time_sshare(env: dict, repeat: int = 3) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run(["sshare", "-a", "-l", "-P"], env)
        times.append(time.perf_counter() - t0)
    return min(times), times


def run_cycle(runner: Runner, source, metrics: Metrics, label: str, env: dict) -> dict:
    calls = source.calls if hasattr(source, "calls") else source.cli.calls  # pyslurm: its CLI reads
    calls.clear()
    rpcs = sdiag_rpcs(env)
    t0 = time.perf_counter()
    with Probe(env, {"squeue": SQUEUE_RUNNING}) as probe:
        res = runner.cycle(label)
    wall = time.perf_counter() - t0
    rpcs = rpc_delta(rpcs, sdiag_rpcs(env))
    t1 = time.perf_counter()
    scrape = len(metrics.render())
    render = time.perf_counter() - t1
    s = {k: res.seconds.get(k, 0.0) for k in ("pull", "compute", "push", "publish")}
    snap = res.snapshot
    return {
        "label": label, "outcome": res.outcome, "error": res.error, "algorithm": res.algorithm,
        "associations": len(snap.associations) if snap else None,
        "pending_jobs": len(snap.jobs) if snap else None,
        "planned": len(res.actions), "pushed": res.pushed, "push_errors": res.push_errors,
        "jobs_gone": res.jobs_gone, "seconds": s, "cycle_seconds": sum(s.values()), "wall_seconds": wall,
        "pull_commands": [[what, secs] for what, secs in calls],
        "scrape_seconds": render, "scrape_bytes": scrape,
        "push_ms_per_job": 1000 * s["push"] / res.pushed if res.pushed else None,
        "rpcs": rpcs, "squeue_during": probe.summary()["squeue"], "peak_rss_mib": peak_rss_mib(),
    }


def jsonable(c: dict) -> dict:
    out = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in c.items()}
    out["seconds"] = {k: round(v, 4) for k, v in c["seconds"].items()}
    out["pull_commands"] = [[what, round(secs, 4)] for what, secs in c["pull_commands"]]
    out["squeue_during"] = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in c["squeue_during"].items()}
    return out


def print_report(cycles: list[dict], sshare_best: float, sshare_all: list[float], setup: dict,
                 setup_squeue: float | None = None) -> None:
    w = sys.stdout.write
    c0 = cycles[0]
    w(f"\ncluster: {c0['associations']} associations, {c0['pending_jobs']} pending jobs, "
      f"algorithm {c0['algorithm']}, push mode site_factor\n\n")
    w(f"{'':28}" + "".join(f"{c['label']:>14}" for c in cycles) + "\n")
    for st in ("pull", "compute", "push", "publish"):
        w(f"{st + ' (s)':28}" + "".join(f"{c['seconds'][st]:14.3f}" for c in cycles) + "\n")
    w(f"{'cycle total (s)':28}" + "".join(f"{c['cycle_seconds']:14.3f}" for c in cycles) + "\n")
    w(f"{'pull + compute (s)':28}"
      + "".join(f"{c['seconds']['pull'] + c['seconds']['compute']:14.3f}" for c in cycles) + "\n")
    w(f"{'(pull+compute) / sshare':28}" + "".join(f"{c['ratio']:14.2f}" for c in cycles) + "\n")
    w(f"{'planned / pushed updates':28}"
      + "".join(f"{str(c['planned']) + ' / ' + str(c['pushed']):>14}" for c in cycles) + "\n")
    w(f"{'push ms per job':28}" + "".join(
        f"{c['push_ms_per_job']:14.2f}" if c["push_ms_per_job"] else f"{'-':>14}" for c in cycles) + "\n")
    w(f"{'outcome':28}" + "".join(f"{c['outcome']:>14}" for c in cycles) + "\n")
    # the registry is this benchmark's own, so each render formats every series: what the daemon
    # does once per cycle (in publish), not what a daemon's scrape costs (it sends those bytes)
    w(f"{'a scrape after (s)':28}" + "".join(f"{c['scrape_seconds']:14.3f}" for c in cycles) + "\n")
    w(f"{'squeue meanwhile, max (s)':28}" + "".join(
        f"{c['squeue_during']['max'] or 0:14.3f}" for c in cycles) + "\n")
    w(f"{'peak RSS (MiB)':28}" + "".join(f"{c['peak_rss_mib']:14.1f}" for c in cycles) + "\n")
    w(f"\nsqueue -t R alone: {setup_squeue:.3f} s\n" if setup_squeue is not None else "")
    w("slurmctld RPCs during each cycle (sdiag):\n")
    for c in cycles:
        w(f"  {c['label']}: " + ", ".join(f"{k} {v}" for k, v in c["rpcs"]) + "\n")
    w(f"\nsshare -a -l -P: best of 3 {sshare_best:.3f} s ({', '.join(f'{t:.3f}' for t in sshare_all)})\n")
    w("pull's Slurm commands (s):\n")
    for c in cycles:
        w(f"  {c['label']}: " + ", ".join(f"{what} {secs:.3f}" for what, secs in c["pull_commands"]) + "\n")
    for name, ok, have in targets(cycles, sshare_best):
        w(f"target {name}: {'PASS' if ok else 'FAIL'} ({have})\n")
    w(f"setup: {', '.join(f'{k} {v:.1f} s' for k, v in setup.items())}\n\n")
    sys.stdout.flush()


def targets(cycles: list[dict], sshare: float) -> list[tuple[str, bool, str]]:
    """Issue 19's targets: first cycle <= 60 s, an unchanged cycle <= 1.2 x sshare, pull + compute
    <= 1.5 x sshare, peak RSS <= 1 GiB."""
    c0, c1 = cycles[0], cycles[-1]
    rss = max(c["peak_rss_mib"] for c in cycles)
    return [("first cycle <= 60 s", c0["cycle_seconds"] <= 60, f"{c0['cycle_seconds']:.1f} s"),
            ("unchanged cycle <= 1.2 x sshare", c1["cycle_seconds"] <= 1.2 * sshare,
             f"{c1['cycle_seconds'] / sshare:.2f} x"),
            ("pull + compute <= 1.5 x sshare", c0["ratio"] <= 1.5, f"{c0['ratio']:.2f} x"),
            ("peak RSS <= 1 GiB", rss <= 1024, f"{rss:.0f} MiB")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--associations", type=int, default=10_000,
                    help="associations in total, as sshare -a lists them (default 10000)")
    ap.add_argument("--jobs", type=int, default=5_000, help="pending jobs (default 5000)")
    ap.add_argument("--quick", action="store_true",
                    help="a small run for trying: 1000 associations, 500 jobs")
    ap.add_argument("--unix-users", type=int, default=50, help="Unix users that submit the jobs (default 50)")
    ap.add_argument("--keep", action="store_true",
                    help="do not tear the instance down (nor remove its users)")
    ap.add_argument("--reuse", action="store_true",
                    help="measure on the instance as it is (kept by an earlier --keep run): build nothing")
    ap.add_argument("--group", type=int, default=0,
                    help="accounts per `sacctmgr add user` call (default: 10 up to 20,000 associations, "
                         "100 above: each call costs time in proportion to the associations already "
                         "there, so fewer, larger calls build 100,000 in ~8 min instead of ~45)")
    ap.add_argument("--bulk", action="store_true",
                    help="write the associations straight into slurmdbd's MariaDB tables and restart "
                         "slurmctld, instead of sacctmgr (22.05's slurmdbd adds ~13 a second: 100,000 "
                         "would take two hours)")
    ap.add_argument("--submit-workers", type=int, default=3, help="concurrent sbatch calls (default 3)")
    ap.add_argument("--arrays", type=int, default=0,
                    help="of the --jobs submissions, this many are job arrays of 100 tasks (default 0)")
    ap.add_argument("--source", choices=("cli", "pyslurm"), default="cli",
                    help="the daemon's source and updater (pyslurm: run from a venv with pyslurm built "
                         "against this Slurm, see tests/matrix.py)")
    ap.add_argument("--levels", type=int, default=None, help="push.levels (default: the daemon's)")
    args = ap.parse_args()
    if args.quick:
        args.associations, args.jobs = 1_000, 500
    if os.geteuid() != 0:
        sys.exit("cycle_slurm: needs root (the dev cluster, useradd, sbatch --uid)")

    env = instance_env()
    cdir = Path(env["FAIRSHARED_CLUSTER_DIR"])
    log(f"instance {env['FAIRSHARED_CLUSTER_NAME']} in {cdir} "
        f"(slurmctld port {env['FAIRSHARED_SLURMCTLD_PORT']})")
    t_start = time.monotonic()
    setup: dict[str, float] = {}
    state = tempfile.mkdtemp(prefix="fs-bench-state-")
    try:
        group = args.group or (10 if args.associations <= 20_000 else 100)
        lay = Layout(args.associations, args.unix_users, group=group)
        if not args.reuse and (cdir / "etc").exists():
            log(f"purging the earlier instance in {cdir}")
            remove_unix_users(env)
            down(env, purge=True)
        t0 = time.monotonic()
        up(env)
        setup["up"] = time.monotonic() - t0
        if not args.reuse:
            t0 = time.monotonic()
            make_unix_users(lay, env)  # before the associations, so slurmctld resolves their uids
            (bulk_tree if args.bulk else build_tree)(lay, env)
            setup["associations"] = time.monotonic() - t0
            for p in PARTITIONS:  # jobs stay PENDING (reason PartitionDown) with a normal priority
                run(["scontrol", "update", f"partitionname={p}", "state=down"], env)
            t0 = time.monotonic()
            submit_jobs(lay, args.jobs, env, args.submit_workers, args.arrays)
            setup["jobs"] = time.monotonic() - t0
        n_assoc = wait_for("associations in sshare", lambda: count_assocs(env), lay.total)
        n_jobs = wait_for("pending jobs", lambda: count_pending(env), args.jobs)
        log(f"cluster ready: {n_assoc} associations, {n_jobs} pending jobs with priority > 0")

        sshare_best, sshare_all = time_sshare(env)
        log(f"sshare -a -l -P: best {sshare_best:.3f} s")
        t0 = time.perf_counter()
        run(["squeue", "-h", "-t", "R", "-o", "%i"], env)
        squeue_alone = time.perf_counter() - t0

        push = {"mode": "site_factor"} | ({"levels": args.levels} if args.levels is not None else {})
        config = config_from_dict({"source": {"kind": args.source, "timeout": 300},
                                   "push": push,
                                   "logging": {"format": "json", "level": "warning"},
                                   "state": {"directory": state}})
        configure_logs("json", "warning")
        if args.source == "pyslurm":  # libslurm reads SLURM_CONF from this process's environment
            os.environ["SLURM_CONF"] = env["SLURM_CONF"]
        source, updater = make_source_and_updater(config, demo=False)
        source.env = dict(env)  # the daemon inherits its environment: here, this instance's SLURM_CONF
        updater.env = dict(env)
        # as the daemon builds them (service.py): publish formats the view once per cycle, in the
        # cycle, and a scrape sends those bytes
        metrics = Metrics(version=__version__, per_job=config.metrics.per_job,
                          associations=config.metrics.associations)
        metrics.set_info(algorithm="cluster", source=args.source, push_mode="site_factor", dry_run=False)
        runner = Runner(config, source, updater, metrics, state)

        cycles = []
        for label in ("cycle 1", "cycle 2"):
            log(f"{label} ...")
            c = run_cycle(runner, source, metrics, label, env)
            c["ratio"] = (c["seconds"]["pull"] + c["seconds"]["compute"]) / sshare_best
            log(f"{label}: {c['outcome']} in {c['cycle_seconds']:.2f} s, {c['pushed']} pushed")
            cycles.append(c)
        sf = run(["sprio", "-h", "-o", "%i %S"], env).stdout.split()
        with_sf = sum(1 for v in sf[1::2] if v != "0")
        setup_total = time.monotonic() - t_start
        print_report(cycles, sshare_best, sshare_all, setup, squeue_alone)
        print(f"jobs holding a non-zero SiteFactor afterwards (sprio): {with_sf}")
        print(json.dumps({
            "benchmark": "cycle_slurm", "associations": n_assoc, "pending_jobs": n_jobs,
            "sshare_seconds": round(sshare_best, 4), "sshare_all": [round(t, 4) for t in sshare_all],
            "cycles": [jsonable(c) for c in cycles],
            "targets": {name: ok for name, ok, _ in targets(cycles, sshare_best)},
            "slurm": run(["scontrol", "--version"], env).stdout.strip(), "date": time.strftime("%Y-%m-%d"),
            "setup_seconds": {k: round(v, 1) for k, v in setup.items()},
            "benchmark_seconds": round(setup_total, 1),
        }), flush=True)
        return 0 if cycles[0]["outcome"] == "success" and cycles[1]["outcome"] == "success" else 1
    finally:
        shutil.rmtree(state, ignore_errors=True)
        if args.keep:
            log(f"kept: export SLURM_CONF={env['SLURM_CONF']}  (tear down: FAIRSHARED_CLUSTER_DIR={cdir} "
                f"deploy/dev-cluster/down --purge; Unix users listed in {cdir / UNIX_USERS_FILE})")
        else:
            log("tearing the instance down")
            remove_unix_users(env)
            down(env, purge=True)
        log(f"benchmark took {time.monotonic() - t_start:.1f} s")


if __name__ == "__main__":
    sys.exit(main())

"""Use the real single-node Slurm dev cluster from tests.

Plain helper module (not a conftest).  It drives ``deploy/dev-cluster/up``
and friends, which start munged, a private MariaDB, slurmdbd, slurmctld and
slurmd under ``$FAIRSHARED_CLUSTER_DIR`` (default /var/tmp/fairshared-cluster
for Debian's 22.05, /var/tmp/fairshared-cluster-SERIES for a release built
from source).  The Slurm release is ``$FAIRSHARED_SLURM_VERSION`` (default
22.05: Debian's package; 23.11, 24.11, 25.11, 26.05 are built from the
tarballs in ../shared/slurm-src, once); ``tests/matrix.py`` runs the suite on
each of them.

Typical use from a conftest::

    import slurm_cluster as sc

    @pytest.fixture(scope="session")
    def slurm():
        return sc.cluster_or_skip("fair_tree")

Policy (``cluster_or_skip``): when ``CI == "true"`` a cluster that cannot be
started is an error that fails the test; elsewhere the test is skipped with a
one-line reason.  The cluster needs root (packages, daemons, useradd).
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import shlex
import signal
import struct
import subprocess
import time
from pathlib import Path
from typing import Iterable, Mapping, Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = REPO_ROOT / "deploy" / "dev-cluster"
UP = SCRIPTS / "up"
DOWN = SCRIPTS / "down"
RESTART_CTLD = SCRIPTS / "restart-ctld"

CLUSTER_NAME = os.environ.get("FAIRSHARED_CLUSTER_NAME", "fairshared-dev")
SLURM_VERSION = os.environ.get("FAIRSHARED_SLURM_VERSION", "22.05")
SERIES = tuple(int(x) for x in SLURM_VERSION.split(".")[:2])  # (25, 11)
PARTITIONS = ("debug", "high")  # debug is the default partition
PRIORITY_MODES = ("fair_tree", "classic")
# up --settings: "site" adds the priority settings sites use, "rate-limit" slurmctld's per-user RPC
# rate limit, "private" PrivateData=usage,jobs (see up)
SETTINGS = ("default", "site", "rate-limit", "assoc-priority", "private")

# First start may install Debian packages (apt-get update + install).
UP_TIMEOUT = 2400.0  # a release built from source takes ~6 min on 2 cores, more when loaded

# Environment variables that change what Slurm commands do or print (e.g.
# SQUEUE_FORMAT, SACCT_FORMAT, SLURM_TIME_FORMAT, SLURM_CLUSTERS, a leaked
# SLURM_JOB_ID...).  They are removed from the cluster environment.
_SLURM_ENV_PREFIXES = (
    "SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_", "SACCT_",
    "SACCTMGR_", "SPRIO_", "SSHARE_", "SCONTROL_", "SREPORT_", "SSTAT_",
)


class ClusterError(RuntimeError):
    """The dev cluster could not be started or used."""


class SlurmCommandError(ClusterError):
    """A Slurm command exited non-zero (message includes its stderr)."""

    def __init__(self, argv: Sequence[str], returncode: int, stdout: str, stderr: str):
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        detail = (stderr or stdout).strip() or "(no output)"
        super().__init__(f"{shlex.join(self.argv)} exited {returncode}: {detail}")


@dataclasses.dataclass(frozen=True)
class ClusterInfo:
    dir: Path
    conf: Path  # slurm.conf; also env["SLURM_CONF"]
    env: Mapping[str, str]  # os.environ (minus SLURM_* etc.) plus SLURM_CONF
    cluster_name: str
    partitions: tuple[str, ...]
    priority: str  # "fair_tree" or "classic"
    node: str
    version: str = ""  # what `scontrol --version` says, e.g. "25.11.7"
    default_partition: str = "debug"
    settings: str = "default"  # up --settings
    backup: bool = False  # up --backup: two slurmctld, SlurmctldHost fsctl1 and fsctl2

    @property
    def series(self) -> tuple[int, int]:
        return tuple(int(x) for x in self.version.split(".")[:2])  # type: ignore[return-value]


_current: ClusterInfo | None = None
_cluster_path: str | None = None  # the cluster's own bin directories, from up's `export PATH=`
_failures: dict[tuple[str, str, bool], ClusterError] = {}
_leftovers_cleared = False


def cluster_dir() -> Path:
    """The same default as deploy/dev-cluster/up's."""
    default = "/var/tmp/fairshared-cluster" + ("" if SERIES == (22, 5) else f"-{SERIES[0]}.{SERIES[1]:02d}")
    return Path(os.environ.get("FAIRSHARED_CLUSTER_DIR", default))


def cluster_env(conf: Path | None = None, path: str | None = None) -> dict[str, str]:
    """os.environ without Slurm client variables, plus SLURM_CONF; ``path``: the cluster's
    own bin directories (from up's ``export PATH=`` line), put first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SLURM_ENV_PREFIXES)}
    env["SLURM_CONF"] = str(conf or cluster_dir() / "etc" / "slurm.conf")
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    path = path or _cluster_path
    if path and not env["PATH"].startswith(path + ":"):
        env["PATH"] = path + ":" + env["PATH"]
    for d in ("/usr/sbin", "/sbin"):  # useradd, slurm daemons
        if d not in env["PATH"].split(":"):
            env["PATH"] += ":" + d
    return env


def parse_exports(stdout: str) -> dict[str, str]:
    """up's ``export NAME=VALUE`` lines; PATH's trailing ``:$PATH`` is dropped."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            out[k.strip()] = v.strip().removesuffix(":$PATH")
    return out


def _script(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    if os.name != "posix" or os.geteuid() != 0:
        raise ClusterError("the Slurm dev cluster needs root (it installs packages and starts daemons)")
    env = cluster_env()
    env["FAIRSHARED_CLUSTER_DIR"] = str(cluster_dir())
    try:
        proc = subprocess.run(
            list(argv), env=env, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=timeout, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(f"{shlex.join(argv)} timed out after {timeout:.0f}s") from exc
    except OSError as exc:
        raise ClusterError(f"cannot run {argv[0]}: {exc}") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-60:])
        first = next((ln for ln in tail.splitlines() if "ERROR" in ln), "")
        raise ClusterError(
            f"{shlex.join(argv)} exited {proc.returncode}"
            + (f": {first.strip()}" if first else "") + f"\n{tail}"
        )
    return proc


def ensure_cluster(priority: str = "fair_tree", settings: str = "default", backup: bool = False) -> ClusterInfo:
    """Bring the cluster up with the given priority mode and settings, and describe it; with
    ``backup``, two controllers (up --backup: fsctl1 the primary, fsctl2 the backup).

    Cached: a repeated call with the same mode and settings does nothing.
    Switching rewrites slurm.conf and restarts slurmctld/slurmd (usage is
    kept).  A failure is remembered, so later calls fail fast with the same error.
    """
    global _current, _cluster_path
    if priority not in PRIORITY_MODES:
        raise ValueError(f"priority must be one of {PRIORITY_MODES}, not {priority!r}")
    if settings not in SETTINGS:
        raise ValueError(f"settings must be one of {SETTINGS}, not {settings!r}")
    key = (priority, settings, backup)
    if _current is not None and (_current.priority, _current.settings, _current.backup) == key:
        return _current
    if key in _failures:
        raise _failures[key]
    d = cluster_dir()
    try:
        proc = _script(_up_argv(priority, settings, backup), UP_TIMEOUT)
    except ClusterError as exc:
        _failures[key] = exc
        raise
    exports = parse_exports(proc.stdout)
    conf = Path(exports.get("SLURM_CONF", d / "etc" / "slurm.conf"))
    _cluster_path = exports.get("PATH")
    if _cluster_path and not os.environ.get("PATH", "").startswith(_cluster_path + ":"):
        # whatever a test starts (daemons, fairshared commands) finds this release's commands first
        os.environ["PATH"] = _cluster_path + ":" + os.environ.get("PATH", "")
    env = cluster_env(conf)
    node = subprocess.run(
        ["hostname", "-s"], capture_output=True, text=True, check=False
    ).stdout.strip() or os.uname().nodename.split(".")[0]
    version = subprocess.run(["scontrol", "--version"], env=env, capture_output=True, text=True,
                             check=False).stdout.split()[-1:] or ["?"]
    _current = ClusterInfo(
        dir=d, conf=conf, env=env, cluster_name=CLUSTER_NAME,
        partitions=PARTITIONS, priority=priority, node=node, version=version[0], settings=settings,
        backup=backup,
    )
    if _current.series != SERIES:
        raise ClusterError(f"asked for Slurm {SLURM_VERSION}, the cluster runs {_current.version}")
    clear_leftovers()
    return _current


def clear_leftovers(timeout: float = 120.0) -> None:
    """Once per test session: cancel every job a previous session left in the cluster.

    The cluster is the tests' own; a job left there (seen: a run whose processes were killed a
    second after its clean-up's scancel, before slurmctld saved its job state, so the restarted
    slurmctld recovered the cancelled jobs of deleted accounts) would keep every later test that
    waits for an empty queue waiting.  Prints what it cancelled."""
    global _leftovers_cleared
    if _leftovers_cleared:
        return
    left = run(["squeue", "-h", "-o", "%i %u %a %T %r"], check=False).stdout.split("\n")
    left = [line for line in left if line.strip()]
    if left:
        print(f"cancelling {len(left)} job(s) a previous test session left: {'; '.join(left)[:500]}",
              flush=True)
        for user in sorted({line.split()[1] for line in left}):
            run(["scancel", f"--user={user}"], check=False)
        wait_quiet(timeout)
    _leftovers_cleared = True


def _up_argv(priority: str, settings: str, backup: bool = False) -> list[str]:
    return [str(UP), "--slurm", SLURM_VERSION, "--priority", priority, "--settings", settings,
            "--dir", str(cluster_dir()), "--quiet", *(["--backup"] if backup else [])]


def current() -> ClusterInfo | None:
    """The ClusterInfo of the last successful ensure_cluster(), if any."""
    return _current


def cluster_available(priority: str = "fair_tree") -> bool:
    """True if ensure_cluster(priority) succeeds; see unavailable_reason()."""
    try:
        ensure_cluster(priority)
    except ClusterError:
        return False
    return True


def unavailable_reason(priority: str = "fair_tree") -> str | None:
    """One-line reason why the cluster could not be started (or None)."""
    exc = _failures.get((priority, "default", False))
    return str(exc).splitlines()[0] if exc else None


def must_fail_loudly() -> bool:
    """In CI (CI=true) an unavailable cluster is a failure, not a skip."""
    return os.environ.get("CI") == "true"


def cluster_or_skip(priority: str = "fair_tree") -> ClusterInfo:
    """ensure_cluster(), or pytest.skip with a one-line reason outside CI.

    With CI=true the ClusterError propagates (the test errors, with the
    tail of the relevant daemon logs in the message).
    """
    import pytest

    try:
        return ensure_cluster(priority)
    except ClusterError as exc:
        if must_fail_loudly():
            raise
        pytest.skip(f"Slurm dev cluster unavailable: {str(exc).splitlines()[0]}")


def restart_ctld(timeout: float = 120.0) -> None:
    """Restart slurmctld only; returns when it answers again.

    slurmctld's decay thread runs one usage-decay + fair-share iteration at
    start-up; the script also waits until that iteration has rewritten
    StateSaveLocation/priority_last_decay_ran, so sshare/sprio show fresh
    values when this returns.
    """
    _script([str(RESTART_CTLD), "--dir", str(cluster_dir()), "--quiet"], timeout)


def _env() -> dict[str, str]:
    return dict(_current.env) if _current is not None else cluster_env()


def run(
    argv: Sequence[str],
    check: bool = True,
    timeout: float = 60.0,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a Slurm command with the cluster environment (argv list, no shell)."""
    argv = [str(a) for a in argv]
    try:
        proc = subprocess.run(
            argv, env=_env(), input=input, capture_output=True, text=True,
            timeout=timeout, check=False,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(f"{shlex.join(argv)} timed out after {timeout:.0f}s") from exc
    if check and proc.returncode != 0:
        raise SlurmCommandError(argv, proc.returncode, proc.stdout, proc.stderr)
    return proc


def sacctmgr(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``sacctmgr -i ARGS`` (immediate, no confirmation prompt)."""
    return run(["sacctmgr", "-i", *args], check=check)


def add_unix_user(name: str) -> int:
    """Create a local Unix user (no home, no login shell) if missing; return its uid."""
    for attempt in range(20):
        try:
            return pwd.getpwnam(name).pw_uid
        except KeyError:
            pass
        proc = subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            env=cluster_env(), capture_output=True, text=True, timeout=60, check=False,
        )
        if proc.returncode == 0:
            return pwd.getpwnam(name).pw_uid
        if proc.returncode == 9:  # already exists (created concurrently)
            continue
        if proc.returncode == 10:  # cannot lock /etc/passwd: retry
            time.sleep(0.2)
            continue
        raise ClusterError(f"useradd {name} exited {proc.returncode}: {proc.stderr.strip()}")
    raise ClusterError(f"useradd {name}: could not create user")


def submit(
    user: str,
    account: str,
    cpus: int,
    seconds: float,
    partition: str | None = None,
    extra: Iterable[str] = (),
) -> int:
    """Submit ``sleep SECONDS`` on CPUS CPUs as Unix user USER; return the job id.

    Runs as root with ``sbatch --uid=USER`` (accepted by 22.05: root submits
    the job on the user's behalf).  Output goes to /dev/null, cwd is /tmp.
    ``extra`` is passed to sbatch, e.g. ("-H",) to submit held, ("--qos=x",).
    """
    argv = [
        "sbatch", "--parsable", f"--uid={user}", f"--account={account}",
        "-n", str(int(cpus)), "--chdir=/tmp", "--output=/dev/null",
        f"--job-name=fs-{user}",
    ]
    if partition:
        argv.append(f"--partition={partition}")
    argv += list(extra)
    argv += ["--wrap", f"sleep {seconds:g}"]
    out = run(argv).stdout.strip()
    try:
        return int(out.split(";", 1)[0])
    except ValueError:
        raise ClusterError(f"unexpected sbatch output: {out!r}") from None


def queue_ids(states: str = "all_active") -> list[int]:
    """Job ids in squeue (default: every pending/running/completing job)."""
    argv = ["squeue", "-h", "-o", "%i"]
    if states != "all_active":
        argv += ["-t", states]
    return [int(x.split("_")[0]) for x in run(argv).stdout.split() if x]


def wait_jobs(job_ids: Iterable[int], timeout: float = 120.0) -> None:
    """Wait until none of job_ids is still in squeue."""
    want = {int(j) for j in job_ids}
    deadline = time.monotonic() + timeout
    while True:
        left = want & set(queue_ids())
        if not left:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs still queued after {timeout:.0f}s: {sorted(left)}")
        time.sleep(0.5)


def wait_running(job_id: int, timeout: float = 60.0) -> None:
    """Wait until job_id runs: a node filler must hold the node before the jobs meant to pend
    are submitted, or the scheduler may start them first (ours push them above the filler)."""
    deadline = time.monotonic() + timeout
    while True:
        state = run(["squeue", "-h", "-j", str(int(job_id)), "-o", "%T"], check=False).stdout.strip()
        if state == "RUNNING":
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} not running after {timeout:.0f}s (state {state or 'gone'!r})")
        time.sleep(0.5)


def wait_quiet(timeout: float = 120.0) -> None:
    """Wait until squeue shows no pending, running or completing jobs."""
    deadline = time.monotonic() + timeout
    while True:
        out = run(["squeue", "-h", "-o", "%i %T %u %a %r"]).stdout.strip()
        if not out:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"squeue not empty after {timeout:.0f}s:\n{out}")
        time.sleep(0.5)


def sshare_rows(*extra: str) -> list[dict[str, str]]:
    """``sshare -a -l -P`` parsed into dicts keyed by the header fields.

    Account values keep sshare's leading-space indentation (tree depth).
    """
    lines = run(["sshare", "-a", "-l", "-P", *extra]).stdout.splitlines()
    if not lines:
        return []
    header = lines[0].split("|")
    return [dict(zip(header, ln.split("|"))) for ln in lines[1:] if ln]


def site_factors(jobs: Iterable[int] | None = None) -> dict[int, int]:
    """SiteFactor of each pending job (of ``jobs``, when given) as sprio shows it, keyed by job id;
    a pending array's own row (``673_[1-3]``) is left out.

    Every pending job is read and the wanted ones kept here, not asked for with ``sprio -j A,B``:
    Slurm 24.11's sprio parses the whole list as one id (src/sprio/opts.c:469 passes ``str``, not
    ``job``; 25.11 fixed it) and exits 1 with "Invalid job id: A"."""
    rows = (ln.split("|") for ln in run(["sprio", "-h", "-o", "%i|%S"]).stdout.split() if ln)
    got = {int(i): int(v) for i, v in rows if i.isdigit()}
    if jobs is None:
        return got
    return {j: got[j] for j in map(int, jobs) if j in got}


def last_decay_ran() -> int:
    """When slurmctld's decay thread last ran (StateSaveLocation/priority_last_decay_ran, Unix s)."""
    data = (cluster_dir() / "state" / "slurmctld" / "priority_last_decay_ran").read_bytes()
    return struct.unpack(">q", data[:8])[0]


def wait_next_calc(timeout: float = 200.0) -> None:
    """Wait for slurmctld's next usage-decay and fair-share iteration (PriorityCalcPeriod=1 min)."""
    before = last_decay_ran()
    deadline = time.monotonic() + timeout
    while last_decay_ran() == before:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no fair-share iteration within {timeout:.0f}s")
        time.sleep(0.5)
    time.sleep(0.5)  # the file is written at the end of the iteration; let sshare's view settle


def bounce_slurmdbd(away: float = 3.0) -> None:
    """Stop slurmdbd, leave slurmctld without it for ``away`` seconds, start it again (up)."""
    pidfile = cluster_dir() / "run" / "slurmdbd.pid"
    pid = int(pidfile.read_text().strip())
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(away)
    up_again()


def up_again() -> None:
    """Run up again for the current cluster: it starts whatever daemon is not running (a stopped
    slurmdbd, a killed controller), changing nothing else."""
    if _current is None:
        raise ClusterError("up_again: no cluster")
    _script(_up_argv(_current.priority, _current.settings, _current.backup), UP_TIMEOUT)


def remove_objects(users: Sequence[str], accounts: Sequence[str] = (), qos: Sequence[str] = ()) -> None:
    """A test's clean-up: cancel its users' jobs, wait until they are gone, then delete the users,
    the accounts (children first: give them in creation order) and the QOS.  Missing ones are fine."""
    for u in users:
        run(["scancel", f"--user={u}"], check=False)
    deadline = time.monotonic() + 120
    while run(["squeue", "-h", "-o", "%i", f"--user={','.join(users)}"], check=False).stdout.split():
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    sacctmgr("delete", "user", "name=" + ",".join(users), check=False)
    if accounts:
        sacctmgr("delete", "account", "name=" + ",".join(reversed(list(accounts))), check=False)
    if qos:
        sacctmgr("delete", "qos", "name=" + ",".join(qos), check=False)


def fairshared(*args: str) -> str:
    """``python -m fairshared ARGS`` of this checkout against the current cluster; its stdout (exit 0 asserted)."""
    import sys

    env = dict(_current.env if _current else cluster_env())
    env["PYTHONPATH"] = str(REPO_ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "fairshared", *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout

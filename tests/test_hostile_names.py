"""No shell strings anywhere: hostile account, user, partition, cluster and job names go through
every command fairshared runs as plain argv elements, never through a shell.

Slurm's tools are replaced by recording executables (tests/fake_slurm_bin.py) in a ``bin_dir``
whose own name is hostile too; they log the argv the kernel handed them and print canned,
valid output full of names with quotes, ``;``, ``$()``, backticks, ``&&``, ``>`` and leading
dashes (within what each output format can carry: sshare's ``|``, the association manager's
``key=value`` words).  Then:

* the daemon's cycles (push modes site_factor, nice and priority; usage from accounting
  over two cycles, so that ``sacct -j`` re-reads a job with a hostile JobIDRaw), the
  sshare+sacctmgr fallback with a hostile ClusterName, and the ``compute``/``usage``/
  ``sprio`` commands run against them and succeed, with the hostile names in their results;
* every command line is one of the known fixed shapes: no name, user-chosen text or
  option-looking word ever reaches an argv, except the cluster name as ``cluster=<name>`` (one
  element) and job ids as the argument of ``sacct -j`` (the next element after an option
  that requires an argument is its value, whatever its first character);
* the builders, fed names with spaces, newlines, ``|`` and the rest directly, pass each
  verbatim as one element;
* no ``$(touch ...)``/backtick in any name ever created its marker file;
* statically: no ``shell=True``, ``os.system``, ``os.popen`` (or other shell helper) in src/,
  and every subprocess call gets an argv list.

Leading dashes, command by command: ``sacctmgr ... cluster=NAME`` (key=value: never an option);
``sacct ... -j IDS`` (the value of ``-j``, which takes a required argument); ``scontrol update
JobId=N Field=V`` (integers formatted by fairshared, in key=value words); every other argument is
a constant.  No command places a user-controlled word where a leading ``-`` would be read as an
option.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from daemon_proc import fairshared_argv
import fake_slurm_bin as fsb
from fairshared.daemon.config import config_from_dict
from fairshared.daemon.runner import Runner
from fairshared.daemon.wiring import make_source_and_updater, usage_source
from fairshared.records import PushAction
from fairshared.sinks.push_cli import CliUpdater
from fairshared.slurm.sprio import SPRIO_FORMAT
from fairshared.slurm.squeue import SQUEUE_LONG
from fairshared.sources.sacct import SACCT_FORMAT, IncrementalJobs, SacctJobs
from fairshared.sources.slurm_cli import SlurmCli

SRC = Path(__file__).resolve().parent.parent / "src"
SEP = "\x1f"

# --- hostile names that the output formats can carry (no whitespace, '|', ',' or line break) ---------
A = "-rf"                                   # an account that looks like an option
B = "$(touch${IFS}pwned-a)"                 # command substitution
C = "`touch${IFS}pwned-b`"                  # backticks (a sub-account of B)
U1 = "--help"
U2 = ";touch${IFS}pwned-c;"
U3 = "o'neil\"q"
U4 = "x&&touch${IFS}pwned-d"
U5 = "--format=x>pwned-e"                   # an option with a value, and a redirection
P = "-p$(touch${IFS}pwned-f)"               # a partition (U5 has a per-partition association there)
JOBID = "-9$(touch${IFS}pwned-j)`touch${IFS}pwned-k`"  # a JobIDRaw sacct would never print, but might
TREE_NAMES = [A, B, C, U1, U2, U3, U4, U5, P]
# names only argv-level builders see: anything an argv element can hold (NUL cannot be in one)
ANYTHING = [
    "-rf", "--help", "-", "--", "a b", " leading", "trailing ", "a\nb", "\n-x", "x|y", "|touch pwned-1",
    "'", '"', "a'b\"c", "a;touch pwned-2", "$(touch pwned-3)", "`touch pwned-4`", "&& touch pwned-5",
    "> pwned-6", "< /etc/passwd", "*", "~", "$HOME", "${IFS}", "a\\b", "\t\r", "-o;$(touch pwned-7)|cat",
    "--format=`touch pwned-8`", "é名前🙂", "=", "cluster=evil",
]

# --- canned output of a small cluster full of those names ---------------------------------------------
#        key (account, user, partition), parent, shares, usage, order
TREE = [
    (("root", None, None), None, 1, 1000.0, 1),
    (("root", "root", None), "root", 1, 0.0, 2),
    ((A, None, None), "root", 10, 400.0, 3),
    ((A, U1, None), A, 1, 300.0, 4),
    ((A, U2, None), A, 1, 100.0, 5),
    ((B, None, None), "root", 20, 600.0, 6),
    ((B, U4, None), B, 1, 0.0, 7),
    ((B, U5, P), B, 2, 500.0, 8),
    ((C, None, None), B, 5, 100.0, 9),
    ((C, U3, None), C, 1, 100.0, 10),
]
JOBS = [(101, U1, A, "batch"), (102, U2, A, "batch"), (103, U3, C, "batch"), (104, U4, B, "batch"),
        (105, U5, B, P)]
NOW = int(time.time())


def config_text(cluster: str) -> str:
    return (f"Configuration data as of 2026-11-22T05:20:43\n"
            f"AccountingStorageEnforce = associations,limits\n"
            f"AccountingStorageTRES   = cpu,mem,energy,node,billing\n"
            f"ClusterName             = {cluster}\n"
            f"FairShareDampeningFactor = 1\n"
            f"PriorityDecayHalfLife   = 00:30:00\n"
            f"PriorityCalcPeriod      = 00:01:00\n"
            f"PriorityFavorSmall      = No\n"
            f"PriorityFlags           = \n"
            f"PriorityMaxAge          = 1-00:00:00\n"
            f"PriorityUsageResetPeriod = NONE\n"
            f"PriorityType            = priority/multifactor\n"
            f"PriorityWeightAge       = 1000\n"
            f"PriorityWeightAssoc     = 0\n"
            f"PriorityWeightFairShare = 10000\n"
            f"PriorityWeightJobSize   = 1000\n"
            f"PriorityWeightPartition = 1000\n"
            f"PriorityWeightQOS       = 1000\n"
            f"PriorityWeightTRES      = CPU=1000\n"
            f"StateSaveLocation       = /nonexistent/fairshared-hostile-test\n"
            f"SLURM_CONF              = /nonexistent/fairshared-hostile-test/slurm.conf\n"
            f"SLURM_VERSION           = 22.05.8\n")


def assoc_mgr_text() -> str:
    ids = {key: i for i, (key, *_rest) in enumerate(TREE, start=1)}
    out = ["Current Association Manager state", "", "Association Records", ""]
    for (acct, user, part), parent, shares, usage, order in TREE:
        uname = f"{user}({1000 + ids[(acct, user, part)]})" if user else ""
        pa = f"{parent}({ids[(parent, None, None)]})" if user is None and parent else ""
        out += [f"ClusterName=fs Account={acct} UserName={uname} Partition={part or ''} Priority=0 "
                f"ID={ids[(acct, user, part)]}",
                f"    SharesRaw/Norm/Level/Factor={shares}/0.00/1/0.00",
                f"    UsageRaw/Norm/Efctv={usage:.2f}/0.00/0.00",
                f"    ParentAccount={pa} Lft={order} DefAssoc=No"]
    return "\n".join(out + ["", "QOS Records", "", "QOS=normal(1)", "    UsageRaw=0.000000", ""])


def _depths() -> dict:
    depth = {"root": 0}
    for (acct, user, _), parent, *_ in TREE:
        if user is None and parent:
            depth[acct] = depth[parent] + 1
    return depth


def sshare_text() -> str:
    depth = _depths()
    rows = ["Account|User|Partition|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS"]
    for (acct, user, part), _parent, shares, usage, _ in TREE:
        d = depth[acct] + (1 if user else 0)
        rows.append(f"{' ' * d}{acct}|{user or ''}|{part or ''}|{'' if acct == 'root' and not user else shares}"
                    f"|0.5|{int(usage)}|0.1|0.1|{'0.5' if user else ''}|1.0")
    return "\n".join(rows) + "\n"


def sshare_ids_text() -> str:
    """``sshare -a -P -o ID,User,Partition,RawShares,FairShare``: the pull's cross-check, by the IDs of
    assoc_mgr_text()."""
    rows = ["ID|User|Partition|RawShares|FairShare"]
    for i, ((acct, user, part), _parent, shares, _usage, _) in enumerate(TREE, start=1):
        rows.append(f"{i}|{user or ''}|{part or ''}|{'' if acct == 'root' and not user else shares}"
                    f"|{'0.5' if user else ''}")
    return "\n".join(rows) + "\n"


def sacctmgr_assoc_text() -> str:
    return "".join(f"{acct}|{user or ''}|{part or ''}|{order}\n" for (acct, user, part), *_r, order in TREE)


def squeue_long_text() -> str:
    return "".join(SEP.join([str(j), str(j), u, a, "normal", "1000", "0", "PENDING", p, str(NOW - 600),
                             str(NOW - 600), str(NOW - 600), "2", "1", "60", "cpu=2,mem=100M,node=1,billing=2",
                             "Priority"]) + "\n" for j, u, a, p in JOBS)


def sprio_text() -> str:
    return "".join(SEP.join([str(j), p, "0", "0", "0.0100000", "0.0000000", "0.5000000", "0.1000000",
                             "1.0000000", "0.0000000", "cpu=0.01"]) + "\n" for j, _u, _a, p in JOBS)


def partitions_text() -> str:
    return "".join(f"PartitionName={p} AllowGroups=ALL Default=NO MaxTime=UNLIMITED PriorityJobFactor=1 "
                   f"PriorityTier=1 State=UP TotalCPUs=4 TotalNodes=1 TRES=cpu=4,mem=8G,node=1,billing=4\n"
                   for p in ("batch", P))


NODES = "NodeName=vm Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=4 CPUTot=4 State=IDLE\n"


def sacct_text(with_hostile_running: bool) -> str:
    lines = [f"{200 + i}|{a}|{u}|{p}|normal|{NOW - 3000}|{NOW - 1000}|COMPLETED|billing=2,cpu=2,node=1"
             for i, (_j, u, a, p) in enumerate(JOBS)]
    if with_hostile_running:
        lines.append(f"{JOBID}|{A}|{U1}|batch|normal|{NOW - 500}|Unknown|RUNNING|billing=1,cpu=1,node=1")
    return "\n".join(lines) + "\n"


def responses(cluster: str = "fs", assoc_mgr_ok: bool = True, hostile_running: bool = True) -> dict:
    def ok(when, stdout):
        return {"when": when, "stdout": stdout}
    return {
        "scontrol": [
            ok(["show", "config"], config_text(cluster)),
            {"when": ["show", "assoc_mgr"], "stdout": assoc_mgr_text() if assoc_mgr_ok else "",
             "stderr": "" if assoc_mgr_ok else "Access/permission denied\n", "rc": 0 if assoc_mgr_ok else 1},
            ok(["show", "partition"], partitions_text()),
            ok(["show", "node"], NODES),
            ok(["update"], ""),
        ],
        "sshare": [ok(["-a", "-l", "-P"], sshare_text()), ok(["-a", "-P", "-o"], sshare_ids_text()),
                   ok([], "ok\n")],
        "sacctmgr": [ok(["show", "assoc"], sacctmgr_assoc_text()),
                     ok(["format=name,usagefactor"], "normal|1.000000\n"),
                     ok(["format=name,priority"], "normal|0\n")],
        "squeue": [ok(["-O"], squeue_long_text())],
        "sprio": [ok(["-o"], sprio_text())],
        "sacct": [ok(["-j"], ""), ok(["-S"], sacct_text(hostile_running))],
    }


# --- checking what was run ---------------------------------------------------------------------------

TAKES_ARG = {"-o", "-O", "-t", "-S", "-E", "-j"}
FLAGS = {"-a", "-l", "-P", "-m", "-h", "-n", "-X", "-D", "--noconvert", "-nP"} | TAKES_ARG
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")


def shape(cmd: list[str]) -> tuple:
    """A command with its variable parts replaced: times, job ids, pushed values."""
    out, prev = [], None
    for el in cmd:
        if prev in ("-S", "-E") and ISO.match(el):
            el = "<time>"
        elif prev == "-j":
            el = "<ids>"
        elif re.fullmatch(r"JobId=\d+", el):
            el = "JobId=<n>"
        elif re.fullmatch(r"(SiteFactor|Nice|Priority)=-?\d+", el):
            el = el.split("=")[0] + "=<v>"
        out.append(el)
        prev = el if el in TAKES_ARG else None
    return tuple(out)


SACCT = ("sacct", "-P", "-n", "-X", "-a", "-D", "--noconvert", "-o", SACCT_FORMAT)
SHAPES = {
    "config": ("scontrol", "show", "config"),
    "assoc_mgr": ("scontrol", "show", "assoc_mgr", "flags=assoc"),
    "sshare": ("sshare", "-a", "-P", "-o", "ID,User,Partition,RawShares,FairShare"),
    "sshare_full": ("sshare", "-a", "-l", "-P", "-m"),
    "squeue": ("squeue", "-h", "-a", "-t", "PD", "-O", SQUEUE_LONG),
    "sprio": ("sprio", "-h", "-o", SPRIO_FORMAT),
    "partitions": ("scontrol", "-a", "-o", "show", "partition"),
    "nodes": ("scontrol", "-a", "-o", "show", "node"),
    "qos_priority": ("sacctmgr", "-nP", "show", "qos", "format=name,priority"),
    "billing": ("scontrol", "show", "partition", "-o"),
    "qos_factor": ("sacctmgr", "-nP", "show", "qos", "format=name,usagefactor"),
    "sacct": SACCT + ("-S", "<time>", "-E", "<time>"),
    "sacct_j": SACCT + ("-j", "<ids>", "-S", "<time>", "-E", "<time>"),
    "site_factor": ("scontrol", "update", "JobId=<n>", "SiteFactor=<v>"),
    "nice": ("scontrol", "update", "JobId=<n>", "Nice=<v>"),
    "priority": ("scontrol", "update", "JobId=<n>", "Priority=<v>"),
}


def check_no_shell(recorded: list[dict], names: list[str], allowed_keys: tuple[str, ...] = ()) -> None:
    """Each name appears only verbatim as a whole ``key=NAME`` element (key in ``allowed_keys``) or as the
    value of an option that takes one; nothing else looks like an option; argv[0] is the bin_dir's."""
    for call in recorded:
        cmd = fsb.command(call)
        prev = None
        for el in cmd[1:]:
            if prev not in TAKES_ARG and el.startswith("-"):
                assert el in FLAGS, f"{el!r} would be read as an option: {cmd}"
            for name in names:
                if len(name) >= 3 and name in el:  # ("-", "=" are in every flag and key=value: checked
                    # by the exact argv comparisons instead)
                    assert prev in TAKES_ARG or any(el == f"{k}={name}" for k in allowed_keys), \
                        f"name {name!r} inside {el!r}: {cmd}"
            prev = el if prev not in TAKES_ARG else None


def no_markers(*roots: Path) -> None:
    found = [p for root in roots for p in root.rglob("pwned*")]
    assert found == [], f"a shell ran a hostile name: {found}"


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """The recording bin_dir (its name hostile too) and a working directory for would-be markers."""
    bindir = tmp_path / "bin dir $(touch${IFS}pwned-bin) `touch pwned-bin2`;'\"|x\nnew line"
    fsb.make_bin(bindir, responses())
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    yield bindir
    no_markers(tmp_path)


def daemon(bindir: Path, state: Path, **sections):
    cfg = config_from_dict({"source": {"kind": "cli", "bin_dir": str(bindir), "timeout": 30}, **sections})
    source, updater = make_source_and_updater(cfg, demo=False)
    assert isinstance(source, SlurmCli) and isinstance(updater, CliUpdater)
    return Runner(cfg, usage_source(cfg, source), updater, None, state)  # as the service does


# --- the daemon's cycles -------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["site_factor", "nice", "priority"])
def test_daemon_cycle_with_hostile_names(cluster, tmp_path, mode):
    r = daemon(cluster, tmp_path / "state", push={"mode": mode, "weight": 1000})
    res = r.cycle()
    assert res.outcome == "success", res.error
    # the names went all the way through: parsed verbatim, computed, planned and pushed
    tree = res.result.tree
    assert {(tree.account[i], tree.user[i], tree.partition[i]) for i in range(tree.n)} == {k for k, *_ in TREE}
    assert {(a.user, a.account, a.partition) for a in res.applied} == {(u, a, p) for _j, u, a, p in JOBS}
    assert res.pushed == len(JOBS)
    recorded = fsb.calls(cluster)
    assert all(c["argv"][0].startswith(str(cluster) + os.sep) for c in recorded)  # the bin_dir, verbatim
    got = {shape(fsb.command(c)) for c in recorded}
    want = {SHAPES[k] for k in ("config", "assoc_mgr", "sshare", mode)}
    want |= {SHAPES[k] for k in ("squeue", "sprio")} if mode != "priority" else \
        {SHAPES[k] for k in ("partitions", "nodes", "qos_priority", "squeue", "sprio")}
    assert got == want
    pushed = [fsb.command(c) for c in recorded if "update" in c["argv"]]
    assert sorted(c[2] for c in pushed) == [f"JobId={j}" for j, *_ in JOBS]
    check_no_shell(recorded, TREE_NAMES)


def test_daemon_usage_from_accounting_rereads_a_hostile_job_id(cluster, tmp_path):
    """Two cycles: the first sees a running job whose JobIDRaw is hostile, the second re-reads it with -j."""
    r = daemon(cluster, tmp_path / "state", push={"mode": "site_factor", "weight": 1000},
               usage={"origin": "accounting"})
    first = r.cycle()
    assert first.outcome == "success", first.error
    fsb.set_responses(cluster, responses(hostile_running=False))  # sacct no longer lists it: re-read it
    fsb.clear_calls(cluster)
    second = r.cycle()
    assert second.outcome == "success", second.error
    recorded = fsb.calls(cluster)
    got = {shape(fsb.command(c)) for c in recorded}
    assert got == {SHAPES[k] for k in ("config", "assoc_mgr", "sshare", "squeue", "sprio", "billing",
                                       "qos_factor", "sacct", "sacct_j", "site_factor")}
    (reread,) = [fsb.command(c) for c in recorded if "-j" in c["argv"]]
    assert reread[reread.index("-j") + 1] == JOBID  # one element, verbatim, as the value of -j
    assert all(c["SLURM_TIME_FORMAT"] == "%s" for c in recorded if fsb.command(c)[0] == "sacct")
    check_no_shell(recorded, TREE_NAMES + [JOBID])


HOSTILE_CLUSTER = "-c my cluster;$(touch${IFS}pwned-cl) `touch pwned-cl2` |x 'q\" && touch pwned-cl3"


def test_sshare_fallback_passes_a_hostile_cluster_name_as_one_key_value(cluster, tmp_path):
    """assoc_mgr refused: the sibling order comes from sacctmgr, filtered by the cluster's name."""
    fsb.set_responses(cluster, responses(cluster=HOSTILE_CLUSTER, assoc_mgr_ok=False))
    snap = SlurmCli(bin_dir=str(cluster)).snapshot(jobs=True)
    assert "assoc_mgr unavailable" in snap.source and snap.cluster == HOSTILE_CLUSTER
    assert {a.key for a in snap.associations} == {k for k, *_ in TREE}
    recorded = fsb.calls(cluster)
    (order,) = [fsb.command(c) for c in recorded if fsb.command(c)[0] == "sacctmgr"]
    assert order == ["sacctmgr", "-nP", "show", "assoc", f"cluster={HOSTILE_CLUSTER}",
                     "format=account,user,partition,lft"]
    check_no_shell(recorded, TREE_NAMES + [HOSTILE_CLUSTER], allowed_keys=("cluster",))


# --- the command line ------------------------------------------------------------------------------------

def fairshared(bindir: Path, *args: str) -> subprocess.CompletedProcess:
    argv = fairshared_argv()  # this interpreter's fairshared, not a PATH shim's (daemon_proc.py)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(argv + list(args), capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("args, shapes, shown", [
    (["compute", "--source", "slurm", "--format", "json"], ("config", "assoc_mgr", "sshare"),
     (A, B, C, U1, U2, U3, U4, U5, P)),
    (["usage", "--format", "json", "--models", "slurm"],
     ("config", "assoc_mgr", "sshare", "billing", "qos_factor", "sacct"), (A, B, C, U1, U2, U3, U4, U5, P)),
    (["sprio", "--source", "slurm", "--format", "json"],
     ("config", "assoc_mgr", "sshare", "partitions", "nodes", "qos_priority", "squeue", "sprio"),
     (U1, U2, U3, U4, U5, P)),
], ids=["compute", "usage", "sprio"])
def test_cli_commands_with_hostile_names(cluster, args, shapes, shown):
    if ":" in str(cluster):
        pytest.skip("the bin_dir cannot go on PATH")
    res = fairshared(cluster, *args)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    out = json.dumps(json.loads(res.stdout), ensure_ascii=False)
    assert all(json.dumps(n, ensure_ascii=False)[1:-1] in out for n in shown)  # read and printed verbatim
    recorded = fsb.calls(cluster)
    assert {shape(fsb.command(c)) for c in recorded} == {SHAPES[k] for k in shapes}
    check_no_shell(recorded, TREE_NAMES + [JOBID])


# --- every builder, fed anything ---------------------------------------------------------------------

def test_run_passes_every_argument_verbatim(cluster):
    cli = SlurmCli(bin_dir=str(cluster))
    assert cli.run(["sshare", *ANYTHING]) == "ok\n"
    cli.run_with(["sshare", *reversed(ANYTHING)], {"SLURM_TIME_FORMAT": "%s"})
    first, second = fsb.calls(cluster)
    assert first["argv"][0] == os.path.join(str(cluster), "sshare")
    assert first["argv"][1:] == ANYTHING and second["argv"][1:] == ANYTHING[::-1]
    assert second["SLURM_TIME_FORMAT"] == "%s"


@pytest.mark.parametrize("name", ANYTHING)
def test_sibling_order_cluster_is_one_key_value_element(cluster, name):
    kind, order = SlurmCli(bin_dir=str(cluster)).sibling_order(name, "22.05.8")
    assert kind == "lft" and order[(A, U1, None)] == 4
    (call,) = fsb.calls(cluster)
    assert fsb.command(call) == ["sacctmgr", "-nP", "show", "assoc", f"cluster={name}",
                                 "format=account,user,partition,lft"]
    check_no_shell([call], [name], allowed_keys=("cluster",))


def test_sacct_rereads_hostile_job_ids_as_the_value_of_j(cluster):
    fsb.set_responses(cluster, responses(hostile_running=False))
    ids = [n for n in ANYTHING if "," not in n] + [JOBID]
    reader = SacctJobs(run=SlurmCli(bin_dir=str(cluster)).run,
                       state=IncrementalJobs(hwm=NOW - 600, running=set(ids)), chunk=1000)
    reader.fetch(now=NOW, not_before=NOW - 86400)
    (reread,) = [fsb.command(c) for c in fsb.calls(cluster) if "-j" in c["argv"]]
    i = reread.index("-j")
    assert reread[i + 1] == ",".join(sorted(ids, key=str))  # one element, right after -j
    assert shape(reread) == SHAPES["sacct_j"]
    check_no_shell([{"argv": reread}], ids)


@pytest.mark.parametrize("name", ANYTHING)
def test_updater_argv_holds_only_integers(cluster, name):
    up = CliUpdater(bin_dir=str(cluster))
    for field, word in (("site_factor", "SiteFactor"), ("nice", "Nice"), ("priority", "Priority")):
        action = PushAction(job_id=101, field=field, new=-5, old=0, contribution=5,
                            user=name, account=name, partition=name)
        assert up.argv(action) == [os.path.join(str(cluster), "scontrol"), "update", "JobId=101", f"{word}=-5"]
        up.apply(action)
    assert len(fsb.calls(cluster)) == 3
    check_no_shell(fsb.calls(cluster), [name])
    # a job id that is not a number is refused before anything runs
    with pytest.raises(ValueError):
        up.apply(PushAction(job_id=name, field="site_factor", new=1))  # type: ignore[arg-type]
    assert len(fsb.calls(cluster)) == 3


# --- static: no shell in src/ ----------------------------------------------------------------------------

SHELL_HELPERS = ("shell=True", "os.system", "os.popen", "getoutput", "getstatusoutput",
                 "create_subprocess_shell", "os.spawn", "pty.spawn")


def test_no_shell_helper_anywhere_in_src():
    offenders = [f"{p.relative_to(SRC)}:{n}: {line.strip()}"
                 for p in sorted(SRC.rglob("*.py"))
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1)
                 if any(h in line for h in SHELL_HELPERS)]
    assert offenders == []


def test_every_subprocess_call_gets_an_argv_list():
    calls = []
    for p in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "subprocess":
                calls.append((p.relative_to(SRC), node))
    assert len(calls) >= 2  # SlurmCli.run and CliUpdater.apply: the check is not vacuous
    for where, node in calls:
        assert node.func.attr in ("run", "Popen", "call", "check_call", "check_output"), where
        assert not any(k.arg in ("shell", "executable") for k in node.keywords), where
        argv = node.args[0] if node.args else next(k.value for k in node.keywords if k.arg == "args")
        # a list display or a name bound to a list — never a string, an f-string or a concatenation
        assert isinstance(argv, (ast.List, ast.Name)), (where, ast.dump(argv))


@pytest.mark.parametrize("mode", ["site_factor", "priority"])
def test_unreadable_job_rows_are_skipped_counted_and_the_cycle_goes_on(tmp_path, monkeypatch, mode):
    """squeue and sprio rows that cannot be read leave those jobs out (logged, counted); lines end at
    \\n only, so line-break characters inside a field (\\x85, \\u2028, \\x1e, \\x0c) split nothing."""
    from fairshared.sinks.metrics import Metrics

    odd = "normal\x85\u2028\x1e\x0c"
    r = responses()
    good_long, good_sprio = squeue_long_text(), sprio_text()
    first = JOBS[0][0]
    r["squeue"] = [{"when": ["-O"], "stdout": good_long.replace("normal", odd, 1) + "777\x1fgarbage\n"}]
    # the second job's sprio row is cut short: whether an operator set its priority is unknown
    second = JOBS[1][0]
    rows = good_sprio.split("\n")
    rows[1] = "\x1f".join(rows[1].split("\x1f")[:4])
    r["sprio"] = [{"when": ["-o"], "stdout": "\n".join(rows)}]
    bindir = tmp_path / "bin"
    fsb.make_bin(bindir, r)
    metrics = Metrics(version="test")
    cfg = config_from_dict({"source": {"kind": "cli", "bin_dir": str(bindir), "timeout": 30},
                            "push": {"mode": mode, "weight": 1000}})
    source, updater = make_source_and_updater(cfg, demo=False)
    res = Runner(cfg, source, updater, metrics, tmp_path / "state").cycle()
    assert res.outcome == "success", res.error
    assert {j.job_id for j in res.snapshot.jobs} == {j for j, *_ in JOBS} - {second}
    assert first in {a.job_id for a in res.applied}  # its odd QOS name went through whole
    assert second not in {a.job_id for a in res.applied}
    skipped = res.snapshot.skipped_rows
    assert len(skipped) == 2 and any("has 2 fields" in s for s in skipped), skipped
    assert any(f"job {second}" in s or "has 4 fields" in s for s in skipped), skipped
    text = metrics.render().decode()
    assert "fairshared_skipped_job_rows_total 2.0" in text, text

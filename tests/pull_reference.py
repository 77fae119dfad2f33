"""The parsers and layouts the pull-speed work replaced, as they were before it: the baseline.

``tests/test_pull_speed.py`` checks the new implementations against these (same results, same
errors, on generated input) and ``benchmarks/pull.py`` times the new ones against them
(``old s`` and ``old/new`` in its table).  Each is the code of its time (sources/slurm_text.py,
sources/jobinfo_cli.py, inputs/sshare_dump.py, engine/sibling_order.py and sources/slurm_cli.py
at 25b9d7e, the commit before the pull-speed branch), only renamed (no module prefix: callers
import the module under a name, ``old`` or ``before``) and given today's names for what it
calls (slurm.units' epoch_seconds and time_limit_minutes, slurm.squeue's skip_or_raise, ...:
the same code, moved into slurm/ since).  Two are not copied because fairshared still holds
them: ``infer`` here is engine.sibling_order.infer, unchanged (infer_lft_or_name falls back to
it), and ``build_tree`` is engine.tree_checked.build_checked, the old one-association-at-a-time build
kept to name build_tree's errors (with only a summed-usage check added).

Frozen: the point is to stay what was replaced.  Do not make it faster, tidier or more correct;
a fix belongs in fairshared, and a test that needs other behaviour wants its own oracle.
fairshared never imports this module.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Mapping

from fairshared.engine.sibling_order import LFT, NAME, infer, name_key
from fairshared.engine.tree import Tree
from fairshared.engine.tree_checked import build_checked
from fairshared.model import PARENT, Association, InputError, Job, Snapshot, check_shares, check_usage
from fairshared.slurm.assoc_mgr import AssocRecord
from fairshared.slurm.sprio import SPRIO_FIELDS, SPRIO_FORMAT, SprioFacts
from fairshared.slurm.squeue import SEP, SQUEUE_ENV, SQUEUE_FIELDS, skip_or_raise, squeue_argv
from fairshared.slurm.sshare import REQUIRED
from fairshared.slurm.units import NICE_OFFSET, epoch_seconds, time_limit_minutes

__all__ = ["build_tree", "in_name_order", "infer", "order_of_22_05", "parse_assoc_mgr", "parse_sprio_facts",
           "parse_squeue", "parse_sshare", "parse_tres", "read_jobs"]

_NAME_UID = re.compile(r"^(.*)\((\d+)\)$")


def _strip_uid(value: str) -> str:
    m = _NAME_UID.match(value)
    return m.group(1) if m else value


def parse_assoc_mgr(text: str, where: str = "scontrol show assoc_mgr") -> list[AssocRecord]:
    """slurm.assoc_mgr.parse_assoc_mgr before: ``re.finditer(r"(\\S+?)=(\\S*)")`` per line."""
    records: list[AssocRecord] = []
    block: dict[str, str] = {}
    start = 0

    def flush():
        if not block:
            return
        w = f"{where}: record at line {start}"
        try:
            ident = int(block["ID"])
        except (KeyError, ValueError):
            raise InputError("has no numeric ID=", w) from None
        account = block.get("Account", "")
        if not account:
            raise InputError("has no Account=", w)
        user = _strip_uid(block.get("UserName", "")) or None
        part = block.get("Partition", "") or None
        shares_field = block.get("SharesRaw/Norm/Level/Factor")
        usage_field = block.get("UsageRaw/Norm/Efctv")
        if shares_field is None or usage_field is None:
            raise InputError("lacks SharesRaw/... or UsageRaw/...", w)
        raw_shares = shares_field.split("/")[0]
        label = f"{w} ({account}{'/' + user if user else ''})"
        if raw_shares.lower() == "parent" or raw_shares == "2147483647":
            shares: int | str = PARENT
        else:
            shares = check_shares(raw_shares, label)
        usage = check_usage(usage_field.split("/")[0], label)
        parent_id = None
        pa = block.get("ParentAccount", "")
        m = _NAME_UID.match(pa)
        if m:
            parent_id = int(m.group(2))
        order: int | str | None = None
        if block.get("Lineage"):
            order = block["Lineage"]
        elif block.get("Lft", "").isdigit():
            order = int(block["Lft"])
        records.append(AssocRecord(ident, account, user, part, parent_id, shares, usage, order))

    in_block = False
    for lineno, line in enumerate(text.split("\n"), start=1):
        if line.startswith("ClusterName="):
            flush()
            block = {}
            start = lineno
            in_block = True
        elif not line.startswith((" ", "\t")):
            flush()
            block = {}
            in_block = False
            continue
        if in_block:
            for m in re.finditer(r"(\S+?)=(\S*)", line):
                block.setdefault(m.group(1), m.group(2))
    flush()
    return records


_MB_POWER = {"K": -1, "M": 0, "G": 1, "T": 2, "P": 3}


def parse_tres(text: str | None) -> dict[str, int]:
    """slurm.tres.parse_tres before: a regex per TRES item."""
    out: dict[str, int] = {}
    if not text or text in ("(null)", "N/A"):
        return out
    for item in text.split(","):
        if "=" not in item:
            continue
        name, value = item.split("=", 1)
        name = name.strip().lower()
        m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGTP]?)", value.strip(), re.IGNORECASE)
        if not m:
            raise InputError(f"TRES {item!r} has no numeric count")
        num = float(m.group(1))
        unit = m.group(2).upper()
        if name.split("/")[0] in ("mem", "bb"):
            num *= 1024.0 ** _MB_POWER.get(unit or "M", 0)
        elif unit:
            num *= 1024.0 ** (_MB_POWER[unit] + 2)
        out[name] = round(num)
    return out


def parse_squeue(text: str, where: str = "squeue", skipped: list[str] | None = None) -> list[Job]:
    """slurm.squeue.parse_squeue before: a dict per row, parse_tres per job."""
    jobs = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        parts = line.split(SEP)
        if len(parts) != len(SQUEUE_FIELDS):
            skip_or_raise(skipped, f"has {len(parts)} fields, expected {len(SQUEUE_FIELDS)}",
                          f"{where}: line {lineno}")
            continue
        d = dict(zip(SQUEUE_FIELDS, (p.strip() for p in parts)))
        try:
            tres = parse_tres(d["tres-alloc"])
            jobs.append(Job(
                job_id=int(d["JobID"]), display_id=d["JobArrayID"], user=d["UserName"],
                account=d["Account"], partition=d["Partition"], qos=d["QOS"], priority=int(d["PriorityLong"]),
                nice=int(d["Nice"]), state=d["State"], submit_time=epoch_seconds(d["SubmitTime"]),
                eligible_time=epoch_seconds(d["EligibleTime"]), accrue_time=epoch_seconds(d["AccrueTime"]),
                cpus=int(d["NumCPUs"]), min_nodes=int(tres.get("node") or d["NumNodes"] or 1),
                time_limit=time_limit_minutes(d["TimeLimit"]), tres=tres, reason=d["Reason"]))
        except (ValueError, InputError) as exc:
            skip_or_raise(skipped, f"cannot read the job: {exc}",
                          f"{where}: line {lineno} (job {d['JobID']})")
    return jobs


def parse_sprio_facts(text: str, where: str = "sprio", bad_jobs: set[int] | None = None,
                          skipped: list[str] | None = None) -> dict[int, SprioFacts]:
    """slurm.sprio.parse_sprio_facts before: setdefault per row, a SprioFacts per job."""
    rows: dict[int, list[list[str]]] = {}
    unreadable: dict[int, str] = {}
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(SEP)]
        try:
            job_id = int(parts[0])
        except ValueError:
            raise InputError(f"unexpected line {line!r}", f"{where}: line {lineno}") from None
        if len(parts) != len(SPRIO_FIELDS):
            unreadable[job_id] = (f"{where}: line {lineno}: has {len(parts)} fields, "
                                  f"expected {len(SPRIO_FIELDS)}")
            continue
        rows.setdefault(job_id, []).append(parts)
    out: dict[int, SprioFacts] = {}
    for job_id, rs in rows.items():
        if job_id in unreadable:
            continue
        try:
            site = int(rs[0][2])
            nice = int(rs[0][3])
            zero = all(float(v) == 0 for r in rs for v in r[4:10]) and not any(r[10] for r in rs)
        except ValueError:
            unreadable[job_id] = f"{where}: job {job_id}: non-numeric factors"
            continue
        if len(rs) > 1:
            direct = (site == -NICE_OFFSET and nice == -NICE_OFFSET) or (zero and site == 0 and nice == 0)
        else:
            direct = zero and site == 0 and nice == 0
        out[job_id] = SprioFacts(0 if direct else site, direct)
    if unreadable:
        if bad_jobs is None:
            raise InputError(next(iter(unreadable.values())))
        bad_jobs.update(unreadable)
        if skipped is not None:
            skipped.extend(unreadable.values())
    return out


def read_jobs(cmds, *, running: bool = False, skipped: list[str] | None = None,
              assoc_priority: Mapping[tuple, int] | None = None) -> list[Job]:
    """sources.jobinfo_cli.read_jobs before: squeue's jobs, then a dataclasses.replace per job for
    sprio's facts.  With ``assoc_priority`` (which read_jobs has taken since), JobInfoCli._read's
    replace per job for each job's association Priority, as it was there."""
    jobs = parse_squeue(cmds.run_with(squeue_argv("all" if running else "PD"), SQUEUE_ENV), skipped=skipped)
    if not jobs:
        return jobs
    bad: set[int] = set()
    facts = parse_sprio_facts(cmds.run_with(["sprio", "-h", "-o", SPRIO_FORMAT]),
                              bad_jobs=bad if skipped is not None else None, skipped=skipped)
    out = []
    for j in jobs:
        if j.job_id in bad:  # unknown whether an operator set its priority: leave it alone
            continue
        f = facts.get(j.job_id)
        out.append(replace(j, site_factor=f.site_factor if f else None,
                           direct_set_prio=bool(f and f.direct_set_prio)))
    if assoc_priority is not None:
        out = [replace(j, assoc_priority=assoc_priority.get((j.account, j.user, (j.partitions or (None,))[0]),
                                                            assoc_priority.get((j.account, j.user, None), 0)))
               for j in out]
    return out


def in_name_order(associations: list[Association]) -> list[Association]:
    """engine.sibling_order.in_name_order before: dataclasses.replace per association."""
    return [replace(a, order=name_key(a)) for a in associations]


def order_of_22_05(assocs: list[Association], reported: dict, cfg: dict, state: str = LFT):
    """SlurmCli.order_of_22_05 before: the name-ordered copy, then infer."""
    if "NO_FAIR_TREE" not in cfg.get("priority_flags", []):
        named = in_name_order(assocs)
        seen = infer({LFT: assocs, NAME: named}, reported)
        if (seen or state) == NAME:
            return named, NAME
    return assocs, LFT


def build_tree(associations: list[Association]) -> Tree:
    """build_tree one association at a time, as before: engine.tree_checked keeps it as the checked path
    that names errors (it adds only the summed-usage check, a cheap pass)."""
    return build_checked(associations)


def parse_sshare(lines, name: str = "<sshare dump>") -> Snapshot:
    """slurm.sshare.parse_sshare before: where built per line, check_usage/check_shares per
    row, every Association built twice."""
    header: list[str] | None = None
    trailing = False
    col: dict[str, int] = {}
    associations: list[Association] = []
    # stack of (depth, account name) for the current path from root
    path: list[tuple[int, str]] = []
    accounts: set[str] = set()
    header_line = 0
    seen: dict[tuple, int] = {}
    reported: dict[tuple, float] = {}
    user_lines: list[tuple[int, str, str]] = []

    for lineno, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        where = f"{name}:{lineno}"
        if not line.strip():
            continue
        if header is None:
            if "|" not in line and line.lstrip().startswith("{"):
                raise InputError(f"looks like a fairshared snapshot (JSON): use --snapshot {name}", where)
            if "|" not in line:
                raise InputError("expected sshare's '|'-separated header (run sshare with -P)", where)
            trailing = line.endswith("|")
            fields = line[:-1].split("|") if trailing else line.split("|")
            header = [f.strip().lower() for f in fields]
            col = {h: i for i, h in enumerate(header)}
            missing = [c for c in REQUIRED if c not in col]
            if missing:
                names = {"account": "Account", "user": "User", "rawshares": "RawShares",
                         "rawusage": "RawUsage"}
                raise InputError(
                    "header lacks the column(s) " + ", ".join(names[m] for m in missing)
                    + " (use sshare -a -l -P)",
                    where,
                )
            header_line = lineno
            continue
        if line.startswith("-") and set(line.strip()) <= {"-", " ", "|"}:
            continue  # a separator line from a non-parsable paste
        fields = (line[:-1] if trailing and line.endswith("|") else line).split("|")
        if len(fields) != len(header):
            raise InputError(f"has {len(fields)} fields, the header has {len(header)}", where)
        acct_field = fields[col["account"]]
        account = acct_field.strip()
        depth = len(acct_field) - len(acct_field.lstrip(" "))
        user = fields[col["user"]].strip() or None
        partition = fields[col["partition"]].strip() or None if "partition" in col else None
        if not account:
            raise InputError("empty Account field", where)
        shares_text = fields[col["rawshares"]].strip()
        usage_text = fields[col["rawusage"]].strip()
        usage = check_usage(usage_text or "0", where)
        if user is None:
            # account row: its parent is the nearest shallower account on the path
            while path and path[-1][0] >= depth:
                path.pop()
            parent = path[-1][1] if path else None
            if parent is None and accounts:  # only the first account row (root) has none
                raise InputError(f"account {account!r} has no parent (is the Account column indented?)",
                                 where)
            if account in accounts:
                raise InputError(f"duplicate account {account!r}", where)
            if parent is None:
                shares = 1 if not shares_text else check_shares(shares_text, where)
            else:
                if not shares_text:
                    raise InputError(f"account {account!r} has no RawShares", where)
                shares = check_shares(shares_text, where)
            accounts.add(account)
            path.append((depth, account))
            associations.append(
                Association(account=account, user=None, parent=parent, shares=shares, usage=usage)
            )
        else:
            user_lines.append((lineno, user, account))  # its account may come later (see below)
            if not shares_text:
                raise InputError(f"user {user!r} has no RawShares", where)
            shares = check_shares(shares_text, where)
            key = (account, user, partition)
            if key in seen:
                raise InputError(f"duplicate association of user {user!r} in account {account!r} "
                                 f"(first at line {seen[key]})", where)
            seen[key] = lineno
            fs_text = fields[col["fairshare"]].strip() if "fairshare" in col else ""
            if fs_text:
                try:
                    reported[key] = float(fs_text)
                except ValueError:
                    raise InputError(f"FairShare {fs_text!r} of user {user!r} is not a number",
                                     where) from None
            associations.append(
                Association(
                    account=account, user=user, parent=account, shares=shares, usage=usage,
                    partition=partition
                )
            )
    if header is None:
        raise InputError("is empty (expected the output of sshare -a -l -P)", name)
    # 22.05's sshare can print a FairShare=parent user's row before root or away from its account
    # (it walks the list slurmctld holds, and such a user sits with its fs-parent's children)
    for lineno, user, account in user_lines:
        if account not in accounts:
            raise InputError(f"user {user!r} names account {account!r}, which no row defines",
                             f"{name}:{lineno}")
    if not associations:
        raise InputError("has a header but no associations", f"{name}:{header_line}")
    # the dump's row order is the sibling order (see module docstring)
    ordered = [
        Association(a.account, a.user, a.parent, a.shares, a.usage, a.partition, order=i)
        for i, a in enumerate(associations)
    ]
    return Snapshot(associations=ordered, source=f"sshare dump {name}", sibling_order="input",
                    reported_fairshare=reported)

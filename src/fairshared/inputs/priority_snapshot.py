"""The snapshot file as ``sprio``, ``explain``, ``compare`` and ``compute`` read and write it.

One document (described field by field in ``docs/snapshot-format.md``): the association tree and
config of :mod:`fairshared.inputs.snapshot`, plus a ``priority_inputs`` block with the pending
jobs, the cluster's partitions, QOS and node/CPU counts, and sshare's FairShare column.  A
snapshot without that block (an older one, or one saved from an sshare dump's tree) reads as a
cluster with no pending jobs.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, replace

from ..model import ClusterInfo, InputError, Job, PartitionInfo, Snapshot
from ..slurm.versions import release_of
from .snapshot import parse_document, snapshot_from_dict, snapshot_to_dict
from .snapshot_schema import check_priority_inputs

__all__ = ["PRIORITY_INPUTS_VERSION", "inputs_from_dict", "inputs_to_dict", "load_inputs_file", "read_text",
           "save_inputs"]

PRIORITY_INPUTS_VERSION = 1


def read_text(path: str) -> tuple[str, str]:
    """The text of ``path`` ('-' = standard input) and the name to report it by."""
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        with open(path, encoding="utf-8", errors="strict") as fh:
            return fh.read(), path
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"is not UTF-8 text ({exc.reason})", path) from None


def inputs_to_dict(snap: Snapshot, evaluated_at: float | None) -> dict:
    """A snapshot document (``compute`` reads it too) with a ``priority_inputs`` block: the jobs,
    ``snap.cluster_info`` (a default :class:`ClusterInfo` when it was not read) and sshare's FairShare
    column (``reported_fairshare``; null when it was not read)."""
    doc = snapshot_to_dict(snap)
    c = snap.cluster_info if snap.cluster_info is not None else ClusterInfo()
    doc["priority_inputs"] = {
        "version": PRIORITY_INPUTS_VERSION,
        "evaluated_at": evaluated_at,
        "last_calc": snap.last_calc,
        "cluster": {
            "node_count": c.node_count,
            "cpu_count": c.cpu_count,
            "assoc_priority_max": c.assoc_priority_max,
            "tres_order": list(c.tres_order),
            "qos": dict(c.qos_priority),
            "partitions": [
                {"name": p.name, "priority_job_factor": p.priority_job_factor, "priority_tier": p.priority_tier,
                 "max_time": p.max_time, "tres": dict(p.tres)}
                for p in c.partitions.values()
            ],
        },
        "jobs": [{**{k: v for k, v in asdict(j).items() if k != "partition"}, "partitions": list(j.partitions),
                  "tres": dict(j.tres)} for j in snap.jobs],
        "slurm_fairshare": None if snap.reported_fairshare is None else [
            {"account": a, "user": u, "partition": p, "fairshare": f}
            for (a, u, p), f in snap.reported_fairshare.items()
        ],
    }
    return doc


_JOB_INT = ("job_id", "priority", "nice", "site_factor", "submit_time", "eligible_time", "accrue_time",
            "min_nodes", "cpus", "assoc_priority")


def inputs_from_dict(doc: object, name: str = "<snapshot>") -> Snapshot:
    """A snapshot document → a Snapshot with details; without a ``priority_inputs`` block: no jobs,
    a default cluster."""
    snap = snapshot_from_dict(doc, name)
    block = doc.get("priority_inputs") if isinstance(doc, dict) else None
    if block is None:
        return snap.with_empty_details()
    where = f"{name}: priority_inputs"
    if not isinstance(block, dict) or block.get("version") != PRIORITY_INPUTS_VERSION:
        raise InputError(f"is not a version {PRIORITY_INPUTS_VERSION} object", where)
    check_priority_inputs(block, name)
    try:
        c = block.get("cluster") or {}
        parts = {}
        for i, p in enumerate(c.get("partitions") or []):
            mt = p.get("max_time")
            parts[str(p["name"])] = PartitionInfo(
                name=str(p["name"]), priority_job_factor=int(p.get("priority_job_factor", 1)),
                priority_tier=int(p.get("priority_tier", 1)), max_time=None if mt is None else int(mt),
                tres={str(k): int(v) for k, v in (p.get("tres") or {}).items()})
        cluster = ClusterInfo(
            partitions=parts,
            qos_priority={str(k): int(v) for k, v in (c.get("qos") or {}).items()},
            node_count=int(c.get("node_count", 1)), cpu_count=int(c.get("cpu_count", 1)),
            assoc_priority_max=int(c.get("assoc_priority_max", 0)),
            tres_order=tuple(c.get("tres_order") or ClusterInfo().tres_order),
            slurm_version=release_of(snap.settings.slurm_version),
        )
        if cluster.node_count < 1 or cluster.cpu_count < 1:
            raise ValueError("node_count and cpu_count must be >= 1")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"bad cluster description ({exc})", where) from None
    jobs = []
    if not isinstance(block.get("jobs") or [], list):
        raise InputError("jobs is not a list", where)
    for i, j in enumerate(block.get("jobs") or []):
        try:
            kw = {k: int(j[k]) for k in _JOB_INT if k in j and j[k] is not None}
            tl = j.get("time_limit")
            kw.setdefault("priority", 1)
            jobs.append(Job(
                user=str(j["user"]), account=str(j["account"]),
                partition=",".join(str(p) for p in j["partitions"]),
                qos=str(j.get("qos", "normal")), state=str(j.get("state", "PENDING")),
                direct_set_prio=bool(j.get("direct_set_prio", False)),
                time_limit=None if tl is None else int(tl),
                tres={str(k): int(v) for k, v in (j.get("tres") or {}).items()},
                display_id=str(j.get("display_id") or j["job_id"]), reason=str(j.get("reason", "")),
                **kw))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"is not a job record ({exc})", f"{where}.jobs[{i}]") from None
    fs = block.get("slurm_fairshare")
    slurm_fs = None
    if fs is not None:
        try:
            slurm_fs = {(r["account"], r["user"], r.get("partition")): float(r["fairshare"]) for r in fs}
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"bad slurm_fairshare ({exc})", where) from None
    ev = block.get("evaluated_at")
    return replace(snap, cluster_info=cluster, jobs=jobs, last_calc=block.get("last_calc"),
                   reported_fairshare=slurm_fs, evaluated_at=ev if ev is not None else snap.taken_at,
                   warnings=[*snap.warnings, *unknown_references(snap.associations, cluster, jobs, name)])


def unknown_references(associations, cluster: ClusterInfo, jobs, name: str) -> list[str]:
    """One warning per kind of name a job gives that the snapshot does not describe: an association
    (its fair-share factor is then 0), a partition (partition factor 0, tier 1) or a QOS (QOS factor
    0).  Slurm itself could not hold such a job, so the file was edited or mixed from two clusters;
    the figures are still computed, as Slurm's formulas give them for what is there."""
    users = {(a.account, a.user) for a in associations if a.user}
    kinds = {
        "an association (account/user)": [f"{j.account}/{j.user}" for j in jobs if (j.account, j.user) not in users],
        "a partition": [p for j in jobs for p in j.partitions if cluster.partitions and p not in cluster.partitions],
        "a QOS": [j.qos for j in jobs if j.qos and cluster.qos_priority and j.qos not in cluster.qos_priority],
    }
    out = []
    for kind, names in kinds.items():
        if names:
            distinct = list(dict.fromkeys(names))
            first = ", ".join(distinct[:3])
            out.append(f"{name}: {len(names)} job(s) name {kind} the snapshot does not describe "
                       f"({first}{', ...' if len(distinct) > 3 else ''}); it counts as 0")
    return out


def save_inputs(snap: Snapshot, path: str, evaluated_at: float | None, stdout=None) -> None:
    """Write ``snap`` to ``path`` as a snapshot document (what ``--snapshot`` reads back); ``-`` is
    ``stdout`` (the command's own output is then left out: see ``cli.main``)."""
    if path == "-":
        out = stdout or sys.stdout
        json.dump(inputs_to_dict(snap, evaluated_at), out, indent=1)
        out.write("\n")
        return
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(inputs_to_dict(snap, evaluated_at), fh, indent=1)
            fh.write("\n")
    except OSError as exc:
        raise InputError(f"cannot write snapshot: {exc.strerror}", path) from None


def load_inputs_file(path: str) -> Snapshot:
    """Read a snapshot file (``-`` = standard input); an sshare dump or bad JSON names the file."""
    text, name = read_text(path)
    return inputs_from_dict(parse_document(text, name), name)

"""Sample inputs several test modules share: a small hand-made snapshot with jobs (explain, compare,
whatif), an sshare dump, and the oracle's fixtures and their associations.  Written once here
instead of imported from one test module by another (issue 28 §4)."""

from __future__ import annotations

import json
from pathlib import Path

from fairshared.model import PARENT, Association

DATA = Path(__file__).resolve().parent / "data"  # the oracle's fixtures
NOW = 1_800_000_000


def snapshot_doc(slurm_fairshare: bool = True) -> dict:
    assocs = [
        {"account": "root", "user": None, "parent": None, "shares": 1, "usage": None, "order": 1},
        {"account": "A", "user": None, "parent": "root", "shares": 1, "usage": None, "order": 2},
        {"account": "B", "user": None, "parent": "root", "shares": 1, "usage": None, "order": 3},
        {"account": "A", "user": "u1", "parent": "A", "shares": 1, "usage": 30.0, "order": 4},
        {"account": "A", "user": "u2", "parent": "A", "shares": 1, "usage": 10.0, "order": 5},
        {"account": "B", "user": "u3", "parent": "B", "shares": 1, "usage": 40.0, "order": 6},
        {"account": "B", "user": "u4", "parent": "B", "shares": 3, "usage": 20.0, "order": 7},
    ]

    def j(job_id, user, account, part, qos, cpus, nodes, accrue, priority, **kw):
        return {"job_id": job_id, "display_id": str(job_id), "user": user, "account": account,
                "partitions": [part], "qos": qos, "state": "PENDING", "priority": priority,
                "submit_time": NOW - 200000, "eligible_time": NOW - 200000, "accrue_time": accrue,
                "cpus": cpus, "min_nodes": nodes, "time_limit": None, "tres": {}, **kw}

    return {
        "schema": "fairshared-snapshot", "version": 1, "cluster": "test", "source": "hand",
        "taken_at": NOW, "sibling_order": "lft",
        "config": {"priority_flags": [], "dampening": 1, "max_age_seconds": 86400, "favor_small": False,
                   "weight_age": 1000, "weight_fairshare": 10000, "weight_jobsize": 1000,
                   "weight_partition": 1000, "weight_qos": 1000, "weight_assoc": 0, "weight_tres": {}},
        "associations": assocs,
        "priority_inputs": {
            "version": 1, "evaluated_at": NOW, "last_calc": NOW,
            "cluster": {"node_count": 10, "cpu_count": 1000, "assoc_priority_max": 0,
                        "qos": {"normal": 0, "lo": 10, "hi": 40},
                        "partitions": [{"name": "debug", "priority_job_factor": 1, "priority_tier": 1,
                                        "max_time": None, "tres": {}},
                                       {"name": "high", "priority_job_factor": 10, "priority_tier": 1,
                                        "max_time": None, "tres": {}}]},
            "jobs": [
                j(101, "u2", "A", "debug", "normal", 100, 1, NOW - 8640, 10300),
                j(102, "u1", "A", "high", "hi", 500, 5, NOW - 43200, 10500),
                j(103, "u4", "B", "debug", "lo", 10, 1, NOW - 172800, 6305, nice=100),
                j(104, "u3", "B", "high", "normal", 1000, 10, 0, 5000, site_factor=500),
                j(105, "u1", "A", "debug", "normal", 1, 1, 0, 0),
            ],
            "slurm_fairshare": None if not slurm_fairshare else [
                {"account": "A", "user": "u1", "partition": None, "fairshare": 0.75},
                {"account": "A", "user": "u2", "partition": None, "fairshare": 1.0},
                {"account": "B", "user": "u3", "partition": None, "fairshare": 0.25},
                {"account": "B", "user": "u4", "partition": None, "fairshare": 0.5},
            ],
        },
    }


# The shape of `sshare -a -l -P` on 22.05 under Fair Tree (values made up, layout as printed).
DUMP = """\
Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|GrpTRESMins|TRESRunMins
root|||0.000000|1000||1.000000|||cpu=0|cpu=0
 root|root|1|0.009901|0|0.000000|0.000000|1.000000|inf||cpu=0
 phys||40|0.396040|600|0.600000|0.600000||0.660066||cpu=0
  phys|alice|1|0.500000|600|0.600000|1.000000|0.250000|0.500000||cpu=0
  phys|bob|parent|0.396040|0|0.000000|0.000000|0.750000|||cpu=0
  theory||parent|0.396040|0|0.000000|0.000000||||cpu=0
   theory|carol|1|0.500000|0|0.000000|0.000000|1.000000|inf||cpu=0
 chem||60|0.594059|400|0.400000|0.400000||1.485148||cpu=0
  chem|dave|1|1.000000|400|0.400000|1.000000|0.500000|1.000000||cpu=0
"""


def load(name: str) -> dict:
    with open(DATA / f"{name}.json") as f:
        return json.load(f)


def associations(fixture: dict, order=None) -> list[Association]:
    """The fixture's associations; ``order(i)`` gives optional order keys."""
    out = []
    for i, a in enumerate(fixture["associations"]):
        shares = PARENT if a["shares"] == "parent" else a["shares"]
        usage = None if a["usage"] is None else float(a["usage"])
        out.append(Association(account=a["account"], user=a["user"], parent=a["parent"], shares=shares,
                               usage=usage, order=None if order is None else order(i)))
    return out


# two accounts, four users (one on a partition of its own), for the history's and the metrics' tests
TWO_ACCOUNTS = [
    Association("root", None, None, 1, None),
    Association("a", None, "root", 3, None),
    Association("a", "u1", "a", 1, 100.0),
    Association("a", "u2", "a", 1, 0.0),
    Association("b", None, "root", 1, None),
    Association("b", "u3", "b", 1, 0.0),
    Association("b", "u4", "b", 1, 50.0, partition="gpu"),
]

"""``fairshared standing`` as text: the API's standing object (``GET /api/v1/users/{user}``,
docs/api-v1.md) on a terminal.

Pure: from that object to lines.  The daemon's answer and the one computed here go through the same
function, so both ways print the same for the same cycle.
"""

from __future__ import annotations

from ..explain_common import utc


def _num(x, digits: int = 6) -> str:
    """A figure of the API: null (a blank sshare column) is ``-``, ``"inf"`` stays ``inf``."""
    if x is None:
        return "-"
    if x == "inf":
        return "inf"
    return f"{float(x):.{digits}f}"


def _usage(x) -> str:
    """Raw usage (CPU-seconds, decayed): whole units with separators; a blank is ``-``."""
    if x is None:
        return "-"
    return "inf" if x == "inf" else f"{float(x):,.0f}"


def _name(row: dict) -> str:
    """``account``, ``account/user`` or ``account/user (partition)``, as sshare would name it."""
    name = row["account"] + (f"/{row['user']}" if row.get("user") else "")
    return name + (f" ({row['partition']})" if row.get("partition") else "")


def _path_lines(path: list[dict]) -> list[str]:
    """Root down to the association: shares, usage and each level's LevelFS (the Fair Tree figure
    that orders siblings; blank for root and for algorithms that have none)."""
    names = [" " * (2 * int(r.get("depth", k))) + (r["user"] or r["account"]) for k, r in enumerate(path)]
    width = max([len(n) for n in names] + [len("from root down")])
    out = [f"    {'from root down':<{width}}  {'shares':>6}  {'norm shares':>11}  {'raw usage':>14}  "
           f"{'eff. usage':>10}  {'LevelFS':>10}"]
    for n, r in zip(names, path):
        out.append(f"    {n:<{width}}  {str(r['raw_shares']):>6}  {_num(r['norm_shares']):>11}  "
                   f"{_usage(r['raw_usage']):>14}  {_num(r['effective_usage']):>10}  "
                   f"{_num(r['level_fs']):>10}")
    return out


def standing_text(obj: dict, source: str) -> str:
    """The standing ``obj`` (the API's object) as a page; ``source`` says where it came from (the
    daemon and its cycle, or what was read here): the one line that differs between the two ways."""
    cycle = obj["cycle"]
    out = [f"{obj['user']}: fair share at {utc(int(cycle['evaluated_at']))} ({cycle['algorithm']})",
           source, ""]
    assocs = obj["associations"]
    if not assocs:
        out.append(f"{obj['user']} has no association in the tree.")
    for a in assocs:
        rank = f"rank {a['rank']} of {a['of']}" if a.get("rank") else "no rank"
        out.append(f"{_name(a)}: fair-share factor {_num(a['fairshare'])}, {rank}")
        out.append(f"    raw usage {_usage(a['raw_usage'])}, norm shares {_num(a['norm_shares'])}, "
                   f"LevelFS {_num(a['level_fs'])}")
        out.extend(_path_lines(a["path"]))
        out.append("")
    jobs = obj["pending_jobs"]
    total = obj.get("pending_total", len(jobs))  # the API pages a long list: this is its first page
    if not jobs:
        out.append("No pending jobs." if not total else f"Pending jobs: {total} (none on this page)")
        return "\n".join(out) + "\n"
    out.append(f"Pending jobs: {total}" + (f" (the first {len(jobs)} shown)" if total > len(jobs) else ""))
    cols = [("JOBID", lambda j: str(j["display_id"] or j["job_id"])), ("ACCOUNT", lambda j: j["account"]),
            ("PARTITION", lambda j: j["partition"] or "-"), ("QOS", lambda j: j["qos"] or "-"),
            ("PRIORITY", lambda j: f"{j['priority']:,}" if j["priority"] is not None else "-"),
            ("FAIR-SHARE", lambda j: _num(j["fairshare"])), ("REASON", lambda j: j["reason"] or "-")]
    cells = [[f(j) for _, f in cols] for j in jobs]
    widths = [max(len(h), *(len(c[k]) for c in cells)) for k, (h, _) in enumerate(cols)]
    right = {"PRIORITY", "FAIR-SHARE"}

    def line(values: list[str]) -> str:
        return "    " + "  ".join(v.rjust(w) if h in right else v.ljust(w)
                                  for v, w, (h, _) in zip(values, widths, cols)).rstrip()

    out.append(line([h for h, _ in cols]))
    out.extend(line(c) for c in cells)
    return "\n".join(out) + "\n"


__all__ = ["standing_text"]

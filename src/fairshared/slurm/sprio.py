"""``sprio -h -o SPRIO_FORMAT``: each job's SiteFactor and whether an operator set its priority.  Pure.

Release differences: for an operator-set job in several partitions 22.05 prints SITE/NICE −2^31 on
every row (src/sprio/sprio.c ``_filter_job``); from 23.02 on (:data:`fairshared.slurm.versions.SPRIO_23_02`,
``_create_prio_factors_obj``; seen on 23.11 to 26.05) each row shows the set priority with every
factor 0 and SITE/NICE 0.  :func:`parse_sprio_facts` reads both, whatever the release.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import InputError
from .squeue import SEP
from .units import NICE_OFFSET

SPRIO_FIELDS = ("%i", "%r", "%S", "%N", "%a", "%b", "%f", "%j", "%p", "%q", "%T")
SPRIO_FORMAT = SEP.join(SPRIO_FIELDS)


@dataclass(frozen=True)
class SprioFacts:
    site_factor: int
    direct_set_prio: bool


def parse_sprio_facts(text: str, where: str = "sprio", bad_jobs: set[int] | None = None,
                      skipped: list[str] | None = None) -> dict[int, SprioFacts]:
    """``sprio -h -o SPRIO_FORMAT`` → per job: its SiteFactor and whether an operator set its priority.

    sprio shows an operator-set (``direct_set_prio``) job with every factor 0 and
    SITE/NICE 0 (one partition) or SITE/NICE −2^31 (several partitions: sprio's
    ``_filter_job`` drops the direct priority there).  A job whose factors are
    genuinely all 0 with SITE and NICE 0 has priority 1 either way, so calling it
    operator-set changes nothing.

    With ``bad_jobs`` given, a job whose rows cannot be read is added to it (and noted in
    ``skipped``) instead of failing the read: its caller must then leave that job out, since
    whether an operator set its priority is unknown.  A row that names no job id still fails.
    """
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
        seen = rows.get(job_id)
        if seen is None:
            rows[job_id] = [parts]
        else:
            seen.append(parts)
    out: dict[int, SprioFacts] = {}
    shared: dict[tuple[int, bool], SprioFacts] = {}  # immutable: jobs with the same facts share them
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
        if len(rs) > 1:  # several partitions: 22.05's _filter_job prints SITE/NICE −2^31 for it;
            # from 23.02 on every partition's row shows the set priority with all factors 0
            direct = (site == -NICE_OFFSET and nice == -NICE_OFFSET) or (zero and site == 0 and nice == 0)
        else:
            direct = zero and site == 0 and nice == 0
        facts = (0 if direct else site, direct)
        out[job_id] = shared.get(facts) or shared.setdefault(facts, SprioFacts(*facts))
    if unreadable:
        if bad_jobs is None:
            raise InputError(next(iter(unreadable.values())))
        bad_jobs.update(unreadable)
        if skipped is not None:
            skipped.extend(unreadable.values())
    return out


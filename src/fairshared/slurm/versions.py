"""Which Slurm release printed a text, and what changed between the releases fairshared reads.

The releases read (22.05 to 26.05) differ in these formats, each handled where it is parsed:

* 22.05: ``scontrol show assoc_mgr`` and sacctmgr give the sibling order as nested-set ``Lft``;
  sshare prints users first and accounts by name (:mod:`.sshare`); sprio prints SITE/NICE −2^31
  for an operator-set job in several partitions (:mod:`.sprio`).
* 23.02: sprio's ``-l`` columns change and every partition's row of an operator-set job shows
  the set priority (:data:`SPRIO_23_02`; rendered in :mod:`fairshared.priority`); slurmctld
  rate-limits RPCs with ``SlurmctldParameters=rl_enable`` (:data:`RATE_LIMIT`, :mod:`.config`:
  22.05 takes the word and ignores it).
* 23.11: ``Lineage=`` replaces ``Lft=`` (:data:`LINEAGE`, :mod:`.assoc_mgr`); the ``--json``
  options appear (not used: they changed between 23.11 and 26.05).
* 24.11: a pending job's QOS may be a list (``hi,lo``, :mod:`.squeue`).
* 25.11: ``scontrol show config`` names each NO_NORMAL_* flag instead of printing NO_NORMAL_ALL
  for any of them (:data:`NO_NORMAL_NAMED`, :mod:`.config`); slurmctld answers ``GET /readyz``
  (:data:`READYZ`); jobs get SLUIDs, which no format read here asks for (:mod:`.squeue`).
* 26.05: every format read here as in 25.11.

What was read for each: the 22.05.8 cluster and source, and the source trees of 23.11.11, 24.11.7,
25.11.7 and 26.05.3.
"""

from __future__ import annotations

import re

DEFAULT_RELEASE = (22, 5)  # a snapshot that names no release: the oldest one read
SPRIO_23_02 = (23, 2)
RATE_LIMIT = (23, 2)
LINEAGE = (23, 11)
NO_NORMAL_NAMED = (25, 11)
READYZ = (25, 11)


def version_tuple(version: str | None) -> tuple[int, int]:
    """``SLURM_VERSION`` (``22.05.8``, ``25.11.7``) → (major, minor); (0, 0) when it names none."""
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def release_of(slurm_version: str | None) -> tuple[int, int]:
    """The (major, minor) release a SLURM_VERSION names; 22.05's when it names none."""
    version = version_tuple(slurm_version)
    return version if version != (0, 0) else DEFAULT_RELEASE

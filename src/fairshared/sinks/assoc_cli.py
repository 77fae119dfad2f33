"""Association Priority through ``sacctmgr`` (push mode ``assoc_priority`` and the way back).

    sacctmgr -nP show assoc WOPLimits where cluster=<c> format=id,account,user,partition,priority
    sacctmgr -i modify user where cluster=<c> ids=<id>,<id>,... set priority=<v>     (v = -1: clear)

Why by association id, one request per value: sacctmgr's ``modify user`` turns its ``where`` into
one slurmdb_assoc_cond_t (sacctmgr/user_functions.c ``_set_cond`` → association_functions.c
``sacctmgr_set_assoc_cond``: ``Ids``), so one request changes every association of an id list to
one value, in one slurmdbd transaction and one txn_table row (as_mysql_assoc.c
``as_mysql_modify_assocs``).  A list of names and accounts would match their cross product, and
``sacctmgr load`` modifies one association per request.  pyslurm's ``db.Associations.modify``
takes the same condition and one value, so it would save nothing but the process: the command line
serves every release.  An id list is cut at :data:`IDS_PER_REQUEST` ids (an argument stays far
below Linux's 128 KiB per argument; each request stays within the timeout at ~1.2 ms an association).

slurmdbd then sends each changed association to slurmctld (assoc_mgr.c ``assoc_mgr_update_assocs``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

from ..records import AssocPriority, PushError
from ..slurm.sacctmgr import ASSOC_PRIORITY_FIELDS, parse_assoc_priorities
from .base import AssocWriter

IDS_PER_REQUEST = 2000


class SacctmgrAssocs(AssocWriter):
    """Reads and writes associations' own Priority with sacctmgr (argv lists, never a shell)."""

    name = "sacctmgr"

    def __init__(self, *, timeout: float = 120.0, bin_dir: str | None = None, env: dict | None = None):
        self.timeout = timeout
        self.bin_dir = bin_dir
        self.env = env
        self.requests = 0  # slurmdbd requests sent (reads and writes), for the metrics and benchmarks

    def _exe(self) -> str:
        return os.path.join(self.bin_dir, "sacctmgr") if self.bin_dir else "sacctmgr"

    def read_argv(self, cluster: str | None) -> list[str]:
        where = ["where", f"cluster={cluster}"] if cluster else []
        return [self._exe(), "-nP", "show", "assoc", "WOPLimits", *where, f"format={','.join(ASSOC_PRIORITY_FIELDS)}"]

    def write_argv(self, cluster: str | None, ids: Sequence[int], value: int | None) -> list[str]:
        where = [f"cluster={cluster}"] if cluster else []
        return [self._exe(), "-i", "modify", "user", "where", *where, "ids=" + ",".join(str(int(i)) for i in ids),
                "set", f"priority={-1 if value is None else int(value)}"]

    def read(self, cluster: str | None) -> list[AssocPriority]:
        """Every association of ``cluster`` with its own Priority; PushError when sacctmgr fails."""
        text = self._run(self.read_argv(cluster), "reading association priorities")
        return [AssocPriority(*row) for row in parse_assoc_priorities(text)]

    def write(self, cluster: str | None, ids: Sequence[int], value: int | None) -> None:
        """Set the own Priority of the associations ``ids`` to ``value`` (None: clear it), in as few
        requests as :data:`IDS_PER_REQUEST` allows; PushError naming the first refused request."""
        for k in range(0, len(ids), IDS_PER_REQUEST):
            chunk = ids[k:k + IDS_PER_REQUEST]
            self._run(self.write_argv(cluster, chunk, value),
                      f"setting Priority={'-1' if value is None else value} on {len(chunk)} association(s) "
                      f"(ids {chunk[0]}..{chunk[-1]})")

    def _run(self, argv: list[str], what: str) -> str:
        self.requests += 1
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout, env=self.env,
                                 stdin=subprocess.DEVNULL, errors="replace")
        except FileNotFoundError:
            raise PushError(f"{what}: sacctmgr: command not found") from None
        except subprocess.TimeoutExpired:
            raise PushError(f"{what}: sacctmgr did not answer within {self.timeout:g} s") from None
        err = res.stderr.strip()
        if res.returncode == 1 and "Nothing modified" in res.stdout:
            return res.stdout  # every id of the request is gone (deleted): nothing to write, not a refusal
        # sacctmgr exits 0 on some refusals and says so on stderr (" Unknown condition", "Problem ...")
        if res.returncode != 0 or any(w in err for w in ("Unknown condition", "Problem", "error")):
            msg = (err or res.stdout.strip() or f"exit {res.returncode}").splitlines()[-1].strip()
            raise PushError(f"{what}: sacctmgr refused: {msg}")
        return res.stdout

"""What an algorithm returns: one value per association per sshare column.

Arrays are indexed like the :class:`~fairshared.engine.tree.Tree`.  A value
that sshare prints blank is NaN here (``None`` in JSON); infinity is ``inf``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .tree import Tree


@dataclass(eq=False)
class Result:
    algorithm: str
    tree: Tree
    norm_shares: np.ndarray  # float64 (a C double in Slurm)
    norm_usage: np.ndarray  # longdouble, NaN for root
    effective_usage: np.ndarray  # longdouble
    level_fs: np.ndarray  # longdouble, NaN where blank
    fairshare: np.ndarray  # float64, NaN where blank
    fs_raw: np.ndarray | None = None  # uint64, level_based only

    def user_ranks(self) -> np.ndarray:
        """Competition rank (1 = best) of each user by fair-share factor; 0 for accounts.

        Users with equal factors share the best of their ranks ("1224" ranking),
        which is how both Fair Tree and LEVEL_BASED hand out ties.
        """
        ranks = np.zeros(self.tree.n, dtype=np.int64)
        users = np.flatnonzero(self.tree.is_user)
        if users.size == 0:
            return ranks
        f = self.fairshare[users]
        f = np.where(np.isnan(f), -1.0, f)
        # rank = 1 + number of users with a strictly larger factor
        sorted_desc = np.sort(f)[::-1]
        ranks[users] = 1 + np.searchsorted(-sorted_desc, -f, side="left")
        return ranks


def blank(n: int, dtype=np.float64) -> np.ndarray:
    return np.full(n, np.nan, dtype=dtype)


def usage_norm(tree: Tree) -> np.ndarray:
    """NormUsage = min(1, U_raw / U_root), 0 when root has no usage; root blank.

    ``set_assoc_usage_norm`` in priority_multifactor.c.  Root's own value is
    never set in Slurm (NO_VAL), so sshare prints it blank.
    """
    root_usage = tree.usage[0]
    if root_usage == 0:
        out = np.zeros(tree.n, dtype=np.longdouble)
    else:
        out = np.minimum(tree.usage / root_usage, np.longdouble(1))
    out[0] = np.nan
    return out

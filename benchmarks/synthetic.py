"""Synthetic association trees with a realistic shape, for benchmarks.

A few levels of accounts (college → department → group), ~95 % of the
associations users (about 20 per group, some users in several groups), shares
1…1000 with a sprinkle of Fairshare=parent and 0 shares, lognormal usage with a
fifth of the associations unused.  Deterministic for a given (size, seed).
"""

from __future__ import annotations

import numpy as np

from fairshared.model import PARENT, Association


def make_associations(size: int, seed: int = 1) -> list[Association]:
    rng = np.random.default_rng(seed)
    n_accounts = max(3, size // 20)
    branch = max(2, round((n_accounts) ** (1 / 3)))
    out: list[Association] = [Association("root", None, None, 1, None)]
    out.append(Association("root", "root", "root", 1, 0.0))
    groups: list[str] = []
    frontier = ["root"]
    made = 0
    depth = 0
    while made < n_accounts and frontier:
        depth += 1
        nxt = []
        for parent in frontier:
            for _ in range(branch):
                if made >= n_accounts:
                    break
                name = f"a{made}"
                made += 1
                r = rng.random()
                shares = PARENT if (r < 0.02 and parent != "root") else (0 if r < 0.025 else int(rng.integers(1, 1001)))
                out.append(Association(name, None, parent, shares, None))
                nxt.append(name)
        frontier = nxt
    groups = frontier
    n_users = size - len(out)
    accts = rng.integers(0, len(groups), n_users)
    uid = rng.integers(0, max(1, int(n_users * 0.9)), n_users)  # ~10 % of users sit in two groups
    used = rng.random(n_users) > 0.2
    usage = np.where(used, rng.lognormal(10, 2, n_users), 0.0)
    sh = rng.integers(1, 1001, n_users)
    kind = rng.random(n_users)
    seen = set()
    for k in range(n_users):
        acct = groups[accts[k]]
        user = f"u{uid[k]}"
        if (acct, user) in seen:
            user = f"v{k}"
        seen.add((acct, user))
        shares = PARENT if kind[k] < 0.01 else (0 if kind[k] < 0.015 else int(sh[k]))
        out.append(Association(acct, user, acct, shares, float(np.floor(usage[k]))))
    return out

"""Engine speed: each algorithm on synthetic trees of 1k … 1M associations.

Prints one JSON line per algorithm and size:
    {"algorithm", "associations", "seconds", "reference_seconds", "ratio", "build_seconds"}
``seconds`` is the best of a few runs (at least --repeat, and as many as fit in 0.25 s) of the numpy engine on a freshly laid-out
tree (derived arrays such as fs parents and level shares are recomputed each
run); ``reference_seconds`` is the per-node reference implementation of the
test-suite (tests/oracle.py) on the same tree, timed the same way, in the same run where it
is feasible (by default up to 1M associations; --reference-max lowers that), and
``ratio`` = reference / engine.
``build_seconds`` is validating the associations and laying out the tree once.

Target (issue #2): 1,000,000 associations in <= 1 s per algorithm on 2 cores,
and >= 20x the reference.

    python benchmarks/engine.py [--sizes 1000,10000,100000,1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fairshared.engine import ALGORITHMS, Params, build_tree, compute  # noqa: E402
from synthetic import make_associations  # noqa: E402

try:
    from oracle import reference_compute  # noqa: E402
except ImportError:  # the oracle lives with the tests
    reference_compute = None


def fresh(tree):
    """A copy sharing the input arrays but none of the cached derived arrays."""
    return replace(tree)


def best_of(fn, repeat: int, min_total: float = 0.25) -> float:
    """Best of at least ``repeat`` runs, and of as many more as fit in ``min_total`` seconds
    (a sub-millisecond run is otherwise mostly noise); the engine and the reference alike."""
    best = float("inf")
    spent = 0.0
    runs = 0
    while runs < repeat or (spent < min_total and runs < 2000):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best = min(best, dt)
        spent += dt
        runs += 1
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reference-max", type=int, default=1_000_000,
                    help="largest tree on which to time the per-node reference")
    args = ap.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        assocs = make_associations(size)
        t0 = time.perf_counter()
        tree = build_tree(assocs)
        build = time.perf_counter() - t0
        for alg in ALGORITHMS:
            params = Params(priority_levels=4) if alg == "level_based" else Params()
            secs = best_of(lambda: compute(fresh(tree), alg, params), args.repeat)
            ref = None
            if reference_compute is not None and size <= args.reference_max:
                kw = {"priority_levels": 4} if alg == "level_based" else {}
                ref = best_of(lambda: reference_compute(assocs, alg, **kw), 1)
            print(json.dumps({
                "algorithm": alg,
                "associations": tree.n,
                "seconds": round(secs, 4),
                "reference_seconds": None if ref is None else round(ref, 4),
                "ratio": None if ref is None else round(ref / secs, 1),
                "build_seconds": round(build, 3),
            }), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``fairshared run --demo`` on a synthetic tree of SIZE associations and no jobs: the real daemon
(scheduler, HTTP server, API) on a tree as big as a large site's, for tests/test_page_browser.py.

    python tests/big_tree_daemon.py CONFIG SIZE HOST:PORT

The tree is benchmarks/synthetic.py's (accounts three levels deep, ~95 % users), or with SIZE
``flatN`` one account ``wide`` holding N users (more than a page of the API under one parent), the
same at every cycle; everything else (settings, clock) is the demo's.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from synthetic import make_associations  # noqa: E402

from fairshared.daemon import service  # noqa: E402
from fairshared.model import Association  # noqa: E402
from fairshared.sources.demo import DemoSource  # noqa: E402


def main() -> int:
    config, size, listen = sys.argv[1], sys.argv[2], sys.argv[3]
    if size.startswith("flat"):
        tree = [Association("root", None, None, 1, None), Association("wide", None, "root", 1, None)]
        tree += [Association("wide", f"u{k}", "wide", 1 + k % 7, float(1000 * (k % 13))) for k in range(int(size[4:]))]
    else:
        tree = make_associations(int(size))
    demo_snapshot = DemoSource.snapshot

    def big(self, *, jobs: bool = True, details: bool = False):
        """The demo's snapshot with the synthetic tree in place of its 22 associations, and no jobs
        (the demo's jobs belong to the demo's users)."""
        return replace(demo_snapshot(self, jobs=jobs, details=details), associations=tree, jobs=[])

    DemoSource.snapshot = big
    return service.run(config, demo=True, listen=listen)


if __name__ == "__main__":
    raise SystemExit(main())

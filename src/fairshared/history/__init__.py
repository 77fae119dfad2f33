"""The fair-share history: every cycle's factor, rank, usage and pending jobs per user association,
in an embedded SQLite file, downsampled to hours and days (issue 27, section 2).

* :mod:`.rows` — what a cycle adds (pure); :mod:`.rollup` — hours and days, pruning;
* :mod:`.schema` — the tables, and opening a file the daemon can trust;
* :mod:`.query` — which resolution serves which part of a span, and the series;
* :mod:`.store` — :class:`HistoryStore`, the runner's publisher and the API's reader;
* :mod:`.health` — its Prometheus series.
"""

from .health import HistoryCollector
from .store import HistoryStore, HistoryUnavailable

__all__ = ["HistoryCollector", "HistoryStore", "HistoryUnavailable"]

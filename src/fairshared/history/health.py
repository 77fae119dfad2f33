"""How the history is doing, as Prometheus series beside the daemon's runtime metrics.

* ``fairshared_history_write_failures_total{reason}``: cycles whose rows were not written, by reason
  (locked, full, corrupt, refused, error: :mod:`.store`); a ``corrupt`` file set aside counts once
  even when the same cycle's write then succeeds in the new file;
* ``fairshared_history_rows{resolution}``: rows held per resolution (cycle, hour, day), as of the
  last write;
* ``fairshared_history_bytes``: the database's size on disk (the file and its write-ahead log), as
  of the last write;
* ``fairshared_history_write_seconds``: how long the last successful write took.

The figures are kept by the writer; a scrape reads them and never touches the database.
"""

from __future__ import annotations

import threading

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from .rows import RESOLUTIONS

__all__ = ["REASONS", "Health", "HistoryCollector"]

REASONS = ("locked", "full", "corrupt", "refused", "error")


class Health:
    """The writer's figures (see the module docstring); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.failures = dict.fromkeys(REASONS, 0)
        self.rows: dict[str, int] | None = None
        self.bytes: int | None = None
        self.seconds: float | None = None

    def failed(self, reason: str) -> None:
        with self._lock:
            self.failures[reason] = self.failures.get(reason, 0) + 1

    def written(self, seconds: float, sizes: tuple[dict[str, int], int]) -> None:
        with self._lock:
            self.seconds = seconds
            self.rows, self.bytes = dict(sizes[0]), sizes[1]


class HistoryCollector:
    """A prometheus_client collector over a :class:`Health` (register it with the runtime metrics)."""

    def __init__(self, health: Health):
        self.health = health

    def collect(self):
        h = self.health
        with h._lock:
            failures, rows, size, seconds = dict(h.failures), h.rows, h.bytes, h.seconds
        c = CounterMetricFamily("fairshared_history_write_failures", "Cycles whose history was not written, "
                                "by reason (locked, full, reserve, corrupt, refused, error).", labels=["reason"])
        for reason, n in failures.items():
            c.add_metric([reason], n)
        yield c
        if rows is not None:
            g = GaugeMetricFamily("fairshared_history_rows", "Rows in the history database, per resolution "
                                  "(cycle, hour, day), as of its last write.", labels=["resolution"])
            for res in RESOLUTIONS:
                g.add_metric([res], rows.get(res, 0))
            yield g
            yield GaugeMetricFamily("fairshared_history_bytes", "Size of the history database on disk (file "
                                    "and write-ahead log), as of its last write.", value=size)
            yield GaugeMetricFamily("fairshared_history_write_seconds", "Seconds the last history write took "
                                    "(rows, rollup and pruning: one transaction).", value=seconds)

"""Prometheus metrics: what the last cycles produced, served from an immutable snapshot.

:class:`Metrics` owns a :class:`~prometheus_client.CollectorRegistry` holding one
custom collector.  ``publish(cycle)`` (the scheduler thread, after *every* cycle)
builds a new immutable :class:`~.metric_view.MetricsView` of every series and swaps one reference;
``render()`` (HTTP threads) reads that reference once, so a scrape never sees
half a cycle, never blocks on a cycle and never talks to Slurm.  Series are
rebuilt from scratch each cycle, so deleted associations and finished jobs
simply disappear (no ``Gauge.remove()`` bookkeeping).

Which cycle the series come from:

* the per-association and per-job series, ``fairshared_snapshot_*`` and
  ``fairshared_planned_updates`` come from the last cycle that computed a result:
  outcome ``success``, or ``push_failed`` (its factors are fresh; only some job
  updates were refused, which ``fairshared_push_errors_total`` reports);
* a cycle that computed nothing (``pull_failed``, ``compute_failed``) keeps the
  previous series and sets ``fairshared_stale 1``; the next cycle with a result
  sets it back to 0.  ``fairshared_stale`` is 0 before the first cycle.
* ``fairshared_last_success_timestamp_seconds`` moves only on outcome ``success``
  (0 = never); ``fairshared_consecutive_failures`` counts cycles whose outcome is
  not ``success`` (push_failed included), like the runner's retry back-off.

Values sshare prints blank (NaN) are omitted, never exported as 0: account
associations have no ``fairshared_association_fairshare`` / ``_rank`` series (under
Fair Tree and LEVEL_BASED an account has no factor; the exporters that parse
sshare export 0 there, which is wrong), and root has no ``norm_usage``.  An
unused association's LevelFS is +Inf and is exported as ``+Inf``.

LEVEL_BASED's 64-bit "Fairshare Raw" is deliberately *not* exported:

* as a float it is lossy: a double holds 53 bits, so the low levels' buckets are
  rounded away and distinct raws collapse;
* exact hex in a label (``..._info{hex="..."} 1``) makes a new series every time
  usage moves, which is the churn Prometheus labels must not carry;
* everything it encodes is exported already, exactly and per level:
  ``fairshared_association_level_fs`` is each level's F_level (the bucket before
  truncation), and ``fairshared_association_fairshare`` / ``_rank`` are the order the raws give.

The exact value stays available from ``fairshared compute`` (FSRaw, ``%016X``) and its JSON output.

Per-job series: a cycle plans an update only for jobs whose value changes, so
the actions of one cycle are a small, bursty subset of the queue.  The series
therefore carry, for every job still *pending* in the latest snapshot, the last
action planned for it (``fairshared_job_pushed_value`` = the value written, or in
dry run the value that would be written).  A job that started, ended or vanished
disappears at the next cycle with a result; a change of push mode forgets them all.
``fairshared_job_priority`` / ``_factor`` are the cycle's own: the multifactor priority push mode
``priority`` computed for every pending job it planned for (``CycleResult.priorities``); cycles
of other modes have no job details and export none.  ``metrics.per_job`` caps the jobs, whichever
of these series they carry.

``fairshared_association_info`` carries the tree (parent account, depth) with the value series'
own (account, user, partition) labels, so a join adds it to any of them.
``fairshared_fairshare_counted_twice`` follows every cycle that read the cluster's settings.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Callable, Iterator, Mapping

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from ..cycle import STAGES, CycleResult
from ..logs import get_logger
from ..records import PushAction
from .metric_format import NS, encode_each, serving_format
from .metric_samples import NO_TREE, association_samples, exported_rows, priority_samples, tree_labels
from .metric_view import MetricsView, view_families


RUNTIME_TTL = 1.0  # seconds a reading of the runtime metrics (process, Python, HTTP) is served again


class Metrics:
    """The daemon's Prometheus metrics (see the module docstring for the semantics).

    ``associations``: which associations get the per-association series (:func:`exported_rows`).
    ``per_job``: True = a series pair per pending job; False (or 0) = none; an integer N = at
    most N jobs, the lowest job ids (the longest waiting), the rest counted in
    ``fairshared_dropped_job_series``.  Per-user and per-account counts of pending jobs are
    always there: their number follows the associations, not the queue.  Without ``registry`` a private one is made, with the process and
    Python runtime collectors; a registry passed in gets only fairshared's collector.

    ``render()`` and ``exposition()`` format fairshared's own series once per published view
    *and format* (Prometheus text, OpenMetrics) and serve that same bytes object until the next
    publish (they cannot change in between): formatting is what costs on a big cluster (~1 s
    and 11 MB for 50k pending jobs), while a scrape between two cycles then only formats the
    few runtime metrics.  Clients that alternate ``Accept`` headers hit both caches; a scrape
    that arrives while the view is being formatted gets the previous view's bytes (one whole
    earlier cycle) instead of waiting, so at most one HTTP thread per format is ever busy
    formatting.  ``render_count`` counts the formattings.
    """

    content_type: str = CONTENT_TYPE_LATEST
    # the families of a view: an attribute, so that a test can count (or slow) the formattings
    _families = staticmethod(view_families)

    def __init__(self, *, version: str, per_job: bool | int = True, registry: CollectorRegistry | None = None,
                 associations: str = "all"):
        self.version = version
        self.per_job = per_job
        exported_rows(NO_TREE, associations)  # refuses an unknown value now, not at the first cycle
        self.associations = associations
        self._lock = threading.Lock()  # serialises writers; readers never take it
        self._view = MetricsView(info=self._info_labels())
        # content type -> (the view, its exposition): one entry per format, replaced per view
        self._rendered: dict[str, tuple[MetricsView, bytes]] = {}
        self._render_locks = {CONTENT_TYPE_PLAIN_0_0_4: threading.Lock()}
        self.render_count = 0  # formattings of fairshared's series (not the runtime metrics)
        self._runtime: CollectorRegistry | None = None
        self._runtime_cache: dict[str, tuple[float, bytes]] = {}  # content type -> (read at, exposition)
        self._clock = time.monotonic
        if registry is None:
            registry = CollectorRegistry(auto_describe=False)
            self._runtime = CollectorRegistry(auto_describe=False)
            rt = self._runtime
            for collector in (ProcessCollector(registry=rt), PlatformCollector(registry=rt),
                              GCCollector(registry=rt)):
                registry.register(collector)
        self.registry = registry
        registry.register(_Collector(self))

    # -- writers ------------------------------------------------------------------------------------

    def _info_labels(self, algorithm: str = "", source: str = "", push_mode: str = "",
                     dry_run: bool | None = None) -> tuple[tuple[str, str], ...]:
        return (("version", self.version), ("algorithm", algorithm), ("source", source),
                ("push_mode", push_mode), ("dry_run", "" if dry_run is None else ("true" if dry_run else "false")))

    def set_info(self, *, algorithm: str, source: str, push_mode: str, dry_run: bool) -> None:
        """The running configuration, as labels of ``fairshared_info`` (dry_run is "true"/"false")."""
        info = self._info_labels(algorithm, source, push_mode, dry_run)
        with self._lock:
            if info != self._view.info:  # the same labels keep the view, and its formatted bytes
                self._view = replace(self._view, info=info)

    def publish(self, cycle: CycleResult) -> None:
        """Fold one finished cycle (any outcome) into a new view and swap it in."""
        t0 = time.monotonic()
        with self._lock:
            old = self._view
            result = cycle.result if cycle.outcome in ("success", "push_failed") else None
            fresh = result is not None
            cycles = tuple((o, n + (o == cycle.outcome)) for o, n in old.cycles)
            if cycle.outcome not in dict(old.cycles):  # an outcome this module does not know: count it anyway
                cycles += ((cycle.outcome, 1),)
            seconds = {s: float(v) for s, v in cycle.seconds.items()}
            changes: dict = dict(
                cycles=cycles,
                last_cycle=float(cycle.started),
                last_success=float(cycle.started) if cycle.ok else old.last_success,
                consecutive_failures=0 if cycle.ok else old.consecutive_failures + 1,
                stale=0 if fresh else 1,
                jobs_updated=old.jobs_updated + int(cycle.pushed),
                push_errors=old.push_errors + int(cycle.push_errors),
                jobs_gone=old.jobs_gone + int(cycle.jobs_gone),
                push_deferred=old.push_deferred + int(cycle.deferred),
                assoc_written=old.assoc_written + int(cycle.assoc_written),
                taken_back=old.taken_back + int(cycle.taken_back),
                job_rows_skipped=old.job_rows_skipped + (len(cycle.snapshot.skipped_rows) if cycle.snapshot else 0),
            )
            if cycle.algorithm:  # fairshared_info's algorithm: the cycle's, in the view formatted below
                # (set_info after the cycle would find it set, and keep the view and its bytes)
                changes["info"] = tuple((k, cycle.algorithm if k == "algorithm" else v) for k, v in old.info)
            if cycle.fairshare_counted_twice is not None:
                changes["counted_twice"] = int(cycle.fairshare_counted_twice)
            if cycle.controller is not None:
                changes["controller_active"] = int(cycle.controller.active)
            if cycle.push_mode == "assoc_priority" and fresh:
                changes["push_blocked"] = int(cycle.blocked is not None)
                changes["assoc_planned"] = len(cycle.assoc_actions)
            elif cycle.push_mode != "assoc_priority":
                changes["push_blocked"] = changes["assoc_planned"] = None
            if result is not None:  # fresh
                snap = cycle.snapshot
                pending = [j for j in snap.jobs if j.state == "PENDING"] if snap is not None else []
                on = self.per_job is not False
                pending_ids = {j.job_id for j in pending}
                jobs = self._jobs(old, cycle, pending) if on else ()
                cap = None if self.per_job is True or self.per_job is False else int(self.per_job)
                # the cap counts jobs, whichever per-job series they have: the lowest ids keep theirs.
                # It is applied before the priority samples are built: building them for every
                # pending job to keep 5000 took 43 MB of the cycle's peak at 50k jobs (tracemalloc)
                prio_ids = {f.job.job_id for f in cycle.priorities} & pending_ids if on else set()
                ids = sorted({a.job_id for a in jobs} | prio_ids)
                keep = set(ids[:cap] if cap is not None else ids)
                dropped = len(ids) - len(keep)
                wanted = prio_ids if cap is None else prio_ids & keep
                prios = priority_samples(cycle.priorities, wanted) if on else ()
                by_user: dict[tuple[str, str], int] = {}
                for j in pending:
                    by_user[(j.account, j.user)] = by_user.get((j.account, j.user), 0) + 1
                changes.update(
                    assoc=association_samples(result, self.associations),
                    tree=tree_labels(result.tree, self.associations),
                    planned_updates=len(cycle.actions),
                    snapshot_associations=result.tree.n,
                    snapshot_pending_jobs=len(pending),
                    push_mode=cycle.push_mode,
                    jobs=tuple(a for a in jobs if a.job_id in keep),
                    priorities=prios,
                    jobs_dropped=dropped,
                    pending_by_user=tuple(sorted(by_user.items())),
                )
            # publish's own time is this cycle's "publish" stage (the runner measures it after we return)
            seconds["publish"] = time.monotonic() - t0
            order = [*STAGES, *sorted(set(seconds) - set(STAGES))]
            changes["stage_seconds"] = tuple((s, seconds[s]) for s in order if s in seconds)
            changes["duration"] = old.duration.observe(sum(seconds.values()))
            self._view = replace(old, **changes)
        if fresh and self._runtime is not None:
            # format the text exposition here, in the cycle's thread, not in the first scrape after
            # it (seconds at 100,000 associations and jobs: that scrape would wait for it)
            self._render_view(self._view)

    @staticmethod
    def _jobs(old: MetricsView, cycle: CycleResult, pending) -> tuple[PushAction, ...]:
        last = {a.job_id: a for a in old.jobs} if old.push_mode == cycle.push_mode else {}
        last.update((a.job_id, a) for a in cycle.actions)
        ids = {j.job_id for j in pending}
        return tuple(a for jid, a in sorted(last.items()) if jid in ids)

    # -- readers ------------------------------------------------------------------------------------

    def render(self) -> bytes:
        """The exposition of ``self.registry`` (what ``generate_latest(self.registry)`` gives)."""
        if self._runtime is None:  # a caller's registry may hold anything: format it all
            return generate_latest(self.registry)
        return generate_latest(self._runtime) + self._render_view(self._view)

    def _render_view(self, v: MetricsView, encoder=generate_latest, ctype: str = CONTENT_TYPE_PLAIN_0_0_4) -> bytes:
        cached = self._rendered.get(ctype)
        if cached is not None and cached[0] is v:
            return cached[1]
        lock = self._render_locks.get(ctype) or self._render_locks.setdefault(ctype, threading.Lock())
        # another thread formats this format: the previous view's bytes meanwhile (never a wait,
        # so scrapes cannot pile up on HTTP threads behind a big render); the first ever waits
        if not lock.acquire(blocking=cached is None):
            assert cached is not None  # a blocking acquire does not fail
            return cached[1]
        try:
            cached = self._rendered.get(ctype)
            if cached is not None and cached[0] is v:  # formatted while we waited
                return cached[1]
            t0 = time.monotonic()
            body = encode_each(encoder, self._families(v))
            self.render_count += 1
            get_logger().debug("metrics formatted", content_type=ctype, bytes=len(body),
                               seconds=round(time.monotonic() - t0, 3))
            # formats that differ only in name escaping give the same bytes for fairshared's
            # (legacy-named) series: keep one object for them all
            body = next((b for w, b in list(self._rendered.values()) if w is v and b == body), body)
            self._rendered[ctype] = (v, body)
            return body
        finally:
            lock.release()

    def exposition(self, accept: str | None) -> tuple[tuple[bytes, ...], str]:
        """(body parts, content type) for an ``Accept`` header: prometheus-client's own negotiation,
        so a Prometheus that asks for OpenMetrics gets it.  The parts are the runtime metrics (small,
        read at most once a second: :meth:`_runtime_exposition`) and fairshared's series: the cached
        bytes object itself, shared by every scrape of the view (the HTTP server sends it without
        copying it).  Two formats are
        served, whatever the header: so a cycle is formatted at most twice (:func:`serving_format`)."""
        encoder, ctype = serving_format(accept)
        if self._runtime is None:
            return (encoder(self.registry),), ctype
        parts = (self._runtime_exposition(encoder, ctype), self._render_view(self._view, encoder, ctype))
        return parts, ctype

    def _runtime_exposition(self, encoder, ctype: str) -> bytes:
        """The runtime metrics (process, Python, HTTP closes) in one format, read at most once per
        RUNTIME_TTL: each reading opens and reads /proc files, and under load every such call waits
        for the interpreter again (a scrape of the cached series took 20-160 ms while a cycle and a
        formatting ran, 46 of them queued 1.5 s behind each other); within a second the same bytes."""
        now = self._clock()
        cached = self._runtime_cache.get(ctype)
        if cached is not None and 0 <= now - cached[0] < RUNTIME_TTL:
            return cached[1]
        runtime = encoder(self._runtime)
        if ctype.startswith("application/openmetrics-text"):
            runtime = runtime.removesuffix(b"# EOF\n")  # one document: a single # EOF, at the end
        self._runtime_cache[ctype] = (now, runtime)  # two threads may both read: either is right
        return runtime

    def watch_http(self, closed: Callable[[], Mapping[str, int]]) -> None:
        """Export ``fairshared_http_connections_closed_total{reason}`` from ``closed()`` (the HTTP
        server's closes since the start, by reason), read with the runtime metrics."""
        self.watch(_HttpClosed(closed))

    def watch(self, collector) -> None:
        """Serve ``collector``'s series with the runtime metrics (read at most once a second, never
        cached with a cycle's view): a part of the daemon with figures of its own (the history)."""
        (self._runtime if self._runtime is not None else self.registry).register(collector)

    def negotiate(self, accept: str | None) -> tuple[bytes, str]:
        """:meth:`exposition` joined into one bytes object (a copy: for callers that want one)."""
        parts, ctype = self.exposition(accept)
        return b"".join(parts), ctype

    def collect(self) -> Iterator[Metric]:
        return self._families(self._view)  # one read: the whole scrape comes from one view



class _HttpClosed:
    def __init__(self, closed: Callable[[], Mapping[str, int]]):
        self.closed = closed

    def collect(self):
        c = CounterMetricFamily(f"{NS}_http_connections_closed", "HTTP connections the server closed, by "
                                "reason: slow_request (not received whole within http.request_timeout), "
                                "stalled_answer (its answer not moving for http.timeout), late_answer "
                                "(not sent whole within http.answer_timeout), room (closed for a waiting "
                                "connection at http.max_connections).", labels=["reason"])
        for reason, n in self.closed().items():
            c.add_metric([reason], n)
        yield c


class _Collector:
    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def describe(self):  # nothing to pre-declare: names are ours alone in this registry
        return []

    def collect(self):
        return self.metrics.collect()

"""What waitress lacks for a front door under attack, added to it from outside (httpserver.py).

* **A deadline for the whole request.**  waitress's ``channel_timeout`` closes a connection only
  after that long with *nothing* received: one byte every few seconds (slowloris) keeps a
  connection, and a slot under ``connection_limit``, forever.  :class:`DeadlineChannel` notes when
  a request's first byte arrived; :func:`close_slow_requests`, run from waitress's own once-a-second
  maintenance, closes every connection whose request is not complete ``request_timeout`` seconds
  after that, however steadily it trickles.  A request that arrived whole is never cut off here.
* **No request thread for a client that does not read.**  waitress parks a worker thread
  while a connection's unsent output is above its 16 MB high-water mark, and two pipelined
  ``GET /metrics`` of 11 MB are above it: four such clients held every worker, and neither
  timeout closes a connection with a request in service.  The server sets the mark out of
  reach (httpserver.py: the big bodies are views of the metrics cache's bytes, never copies, so
  what is queued costs references, not memory), so a worker queues its answer and moves on.
  :func:`close_stalled` then closes every connection whose pending output has made no progress
  for ``send_timeout`` seconds (the loop closes it at once: a socket whose peer reads nothing
  never becomes writable, so waitress's own ``will_close`` would wait for ever), and
  :class:`DeadlineChannel` serves at most :data:`MAX_PIPELINED` requests received in one go:
  the last of them is answered with ``Connection: close`` and the rest are dropped.
* **A deadline for the whole answer.**  ``close_stalled`` closes an answer that does not move;
  one that moves a little (a client reading a byte every few seconds of an 11 MB ``/metrics``)
  held its connection, a slot under ``connection_limit`` that :func:`evictable` never frees, and
  the cached body of its cycle, as long as it kept reading.  :class:`DeadlineChannel` notes when
  each answer's first byte was queued and the offset of its last; :func:`close_late_answers`,
  from the same maintenance, closes every connection with an answer not sent whole
  ``answer_timeout`` seconds after its first byte was queued, however steadily it is read.
  An answer handed to the kernel whole counts as sent (what is left in the socket buffers is the
  idle timeout's).
* **Room for a probe past the connection cap.**  At ``connection_limit`` waitress stops
  accepting: new connections, ``/-/healthy`` included, waited in the backlog until a trickler's
  deadline freed a slot (700 trickling connections past the 512 cap: p99 2.9 s).
  :func:`evictable` names the connection to close when one waits: the request that has been
  arriving longest, else the connection idle longest -- never one with a request in service or
  an answer on its way.
* **A lane of its own for the probes.**  waitress queues the requests for its workers first
  come, first served, one request of a connection at a time: 50 clients with 3 pipelined
  ``GET /metrics`` each put ~150 requests ahead of a ``/-/healthy``, each a few ms alone and
  tens of ms while a cycle holds the interpreter (the scrape reads /proc for the process
  metrics, and every read waits for the GIL again): a probe waited 0.9 s in that queue and was
  served in no time.  :class:`ProbeLane` sends ``GET``/``HEAD`` of ``/-/healthy`` and
  ``/-/ready`` to a worker of their own, which does nothing else: a probe waits for no scrape,
  no formatting and no ``POST /-/recompute`` waiting for its cycle.
* **One log line for a flood, not one per request.**  waitress logs ``Task queue depth is N``
  for every request that waits for a worker (15,038 lines in 5 s in the issue's attack), and a
  warning each time the connection limit is reached.  :class:`Pressure` is a logging filter on
  those records: it counts them and drops them, and :meth:`Pressure.flush` (called by the server
  thread every second) logs one summary line per ``interval`` (60 s) that saw any: how often
  requests waited, the deepest queue, the slow requests, stalled answers and late answers
  closed, the connections closed to make room, the times the limit was reached.  The closes'
  totals since the start (:meth:`Pressure.closed`) are ``fairshared_http_connections_closed_total``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.task import ErrorTask, ThreadedTaskDispatcher, WSGITask

from ..logs import get_logger

__all__ = ["CLOSE_REASONS", "MAX_PIPELINED", "PROBES", "DeadlineChannel", "ProbeLane", "Pressure",
           "close_late_answers", "close_slow_requests", "close_stalled", "evictable"]

MAX_PIPELINED = 8  # requests a connection may have queued at once (Prometheus sends one at a time)
PROBES = frozenset({"/-/healthy", "/-/ready"})  # answered by ProbeLane's own worker
# why the server closed a connection (fairshared_http_connections_closed_total's reason label)
CLOSE_REASONS = ("slow_request", "stalled_answer", "late_answer", "room")

QUEUE_MESSAGE = "Task queue depth is %d"  # waitress/task.py, logger waitress.queue
LIMIT_MESSAGES = ("total open connections reached the connection limit",  # waitress/server.py
                  "total open connections dropped below the connection limit")


def _noting_answers(task_class):
    """``task_class`` whose task tells its channel, once its answer is queued whole, where it ends."""

    class Task(task_class):
        def service(self):
            try:
                super().service()
            finally:
                self.channel.answer_queued()

    Task.__name__ = Task.__qualname__ = f"Deadline{task_class.__name__}"
    return Task


class DeadlineChannel(HTTPChannel):
    """A waitress channel that knows since when its current request has been arriving, and when
    each of its answers not yet sent began to be queued."""

    request_started: float | None = None  # time.monotonic() of the first byte of the incomplete request
    bytes_sent = 0  # sent to the peer so far (progress, for close_stalled)
    stalled_mark: tuple[float, int] | None = None  # (monotonic time, bytes_sent) output was last seen moving
    answer_started: float | None = None  # time.monotonic() the answer being queued wrote its first byte
    task_class = _noting_answers(WSGITask)
    error_task_class = _noting_answers(ErrorTask)
    # as waitress's HTTPChannel has them (types-waitress leaves out the lock and says Sequence)
    requests_lock: threading.Lock
    requests: list[HTTPRequestParser]

    # (first byte queued at, the offset its last byte ends at in what the connection sends), oldest
    # first: workers append, the loop's close_late_answers pops what has been sent
    answers: deque[tuple[float, int]]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.answers = deque()

    def write_soon(self, data):
        if self.answer_started is None and data:  # a worker's thread, one answer at a time
            self.answer_started = time.monotonic()
        return super().write_soon(data)

    def answer_queued(self) -> None:
        """Called by the task once its answer is queued whole (a worker's thread).  The loop sends
        under ``outbuf_lock`` while a request is in service, so the offset read here is exact."""
        with self.outbuf_lock:
            started, self.answer_started = self.answer_started, None
            if started is not None:
                self.answers.append((started, self.bytes_sent + self.total_outbufs_len))

    def received(self, data):
        before = self.request
        try:
            return super().received(data)
        finally:
            self._bound_pipeline()
            if self.request is None:  # nothing half-received: complete requests are the workers' now
                self.request_started = None
            elif self.request is not before or self.request_started is None:  # a new request began
                self.request_started = time.monotonic()

    def _bound_pipeline(self) -> None:
        """Keep at most MAX_PIPELINED queued requests: the last kept closes the connection after its
        answer, the others (and any half-received one) are dropped unanswered."""
        with self.requests_lock:
            if len(self.requests) <= MAX_PIPELINED:
                return
            for extra in self.requests[MAX_PIPELINED:]:
                extra.close()
            del self.requests[MAX_PIPELINED:]
            # read by waitress's task for its answer; the headers are a dict (types-waitress says Mapping)
            self.requests[-1].headers["CONNECTION"] = "close"  # type: ignore[index]
            if self.request is not None:
                self.request.close()
                self.request = None

    def send(self, data, do_close=True):
        n = super().send(data, do_close=do_close)
        self.bytes_sent += n or 0
        return n


class ProbeLane:
    """Hands waitress's tasks (a connection with a request to serve) to its workers, or, when that
    request is a probe, to a worker of the probes' own.  A connection goes back through here for
    each of its pipelined requests, so a probe sent before ``GET /metrics`` leaves the scrape to
    the workers.  Installed as the server's ``add_task``."""

    def __init__(self, workers: ThreadedTaskDispatcher):
        self.workers = workers
        self.probes = ThreadedTaskDispatcher()
        self.probes.set_thread_count(1)

    @staticmethod
    def is_probe(channel) -> bool:
        requests = getattr(channel, "requests", None)  # read under the channel's requests_lock
        req = requests[0] if requests else None
        return (req is not None and not req.error and req.command in ("GET", "HEAD")
                and req.path in PROBES)

    def add_task(self, channel) -> None:
        (self.probes if self.is_probe(channel) else self.workers).add_task(channel)

    def shutdown(self, timeout: float) -> None:
        # waitress adds the timeout to time.time(): any number of seconds (types-waitress says int)
        self.probes.shutdown(cancel_pending=True, timeout=timeout)  # type: ignore[arg-type]


def close_stalled(channels: Iterable, send_timeout: float, now: float | None = None) -> int:
    """Close every channel whose unsent output has not moved for over ``send_timeout`` s (a peer
    that reads nothing); how many.  Runs in the server loop's thread, as waitress's own closes do."""
    now = time.monotonic() if now is None else now
    closed = 0
    for ch in list(channels):
        if not getattr(ch, "total_outbufs_len", 0):
            ch.stalled_mark = None
            continue
        mark = getattr(ch, "stalled_mark", None)
        sent = getattr(ch, "bytes_sent", 0)
        if mark is None or mark[1] != sent:
            ch.stalled_mark = (now, sent)
        elif now - mark[0] > send_timeout:
            ch.handle_close()  # also wakes a worker that waits on the channel's output
            closed += 1
    return closed


def close_late_answers(channels: Iterable, answer_timeout: float, now: float | None = None) -> int:
    """Close every channel with an answer not sent whole ``answer_timeout`` s after its first byte
    was queued, however steadily it is read; how many.  Runs in the server loop's thread."""
    now = time.monotonic() if now is None else now
    closed = 0
    for ch in list(channels):
        answers = getattr(ch, "answers", None)
        if not answers:
            continue
        while answers and answers[0][1] <= ch.bytes_sent:  # sent whole
            answers.popleft()
        if answers and now - answers[0][0] > answer_timeout:
            ch.handle_close()  # at once, like close_stalled: a slow reader's socket may not be writable
            closed += 1
    return closed


def close_slow_requests(channels: Iterable, request_timeout: float, now: float | None = None) -> int:
    """Mark for closing every channel whose incomplete request began over ``request_timeout`` s ago
    (and that has no complete request in service, whose answer it would cut); how many."""
    now = time.monotonic() if now is None else now
    closed = 0
    for ch in list(channels):
        started = getattr(ch, "request_started", None)
        if started is not None and now - started > request_timeout and not ch.requests and not ch.will_close:
            ch.will_close = True  # waitress closes it at the next turn of its loop
            closed += 1
    return closed


def evictable(channels: Iterable):
    """The connection to close so that a waiting one gets its slot: the incomplete request that began
    first, else the idle connection (no request, nothing to send) quiet longest; None when every one
    has a request in service or output under way."""
    free = [ch for ch in list(channels) if not ch.requests and not getattr(ch, "total_outbufs_len", 0)
            and not ch.will_close]
    arriving = [ch for ch in free if getattr(ch, "request_started", None) is not None]
    if arriving:
        return min(arriving, key=lambda ch: ch.request_started)
    return min(free, key=lambda ch: ch.last_activity, default=None)


class Pressure(logging.Filter):
    """Counts (and drops) waitress's per-request pressure warnings; logs a summary per interval."""

    def __init__(self, interval: float = 60.0, clock: Callable[[], float] = time.monotonic,
                 log: Callable[..., object] | None = None):
        super().__init__()
        self.interval = interval
        self._clock = clock
        self._log = log or get_logger().warning
        self._lock = threading.Lock()
        self._totals = dict.fromkeys(CLOSE_REASONS, 0)
        self._reset()

    def _reset(self) -> None:
        self.queued = 0
        self.max_depth = 0
        self.slow_closed = 0
        self.stalled_closed = 0
        self.late_closed = 0
        self.evicted = 0
        self.limit_reached = 0
        self._since: float | None = None

    def closed(self) -> dict[str, int]:
        """Connections closed since the start, by CLOSE_REASONS (never reset by a summary)."""
        with self._lock:
            return dict(self._totals)

    def _note(self) -> None:
        if self._since is None:
            self._since = self._clock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == QUEUE_MESSAGE:
            args = record.args  # waitress's "Task queue depth is %d": the depth, an int
            depth = args[0] if isinstance(args, tuple) and args and isinstance(args[0], int) else 0
            with self._lock:
                self._note()
                self.queued += 1
                self.max_depth = max(self.max_depth, int(depth))
            return False
        if isinstance(record.msg, str) and record.msg.startswith(LIMIT_MESSAGES):
            with self._lock:
                self._note()
                self.limit_reached += record.msg.startswith(LIMIT_MESSAGES[0])
            return False
        return True

    def slow(self, n: int) -> None:
        if n:
            with self._lock:
                self._note()
                self.slow_closed += n
                self._totals["slow_request"] += n

    def stalled(self, n: int) -> None:
        if n:
            with self._lock:
                self._note()
                self.stalled_closed += n
                self._totals["stalled_answer"] += n

    def late(self, n: int) -> None:
        if n:
            with self._lock:
                self._note()
                self.late_closed += n
                self._totals["late_answer"] += n

    def evict(self, n: int) -> None:
        if n:
            with self._lock:
                self._note()
                self.evicted += n
                self._totals["room"] += n

    def flush(self, force: bool = False) -> bool:
        """Log the summary of a window once it is ``interval`` old (or at once with ``force``); a
        window opens at the first warning after a quiet spell.  Whether a line was logged."""
        now = self._clock()
        with self._lock:
            if self._since is None or (now - self._since < self.interval and not force):
                return False
            fields = {"queued": self.queued, "max_queue_depth": self.max_depth,
                      "slow_requests_closed": self.slow_closed, "stalled_answers_closed": self.stalled_closed,
                      "late_answers_closed": self.late_closed, "closed_for_room": self.evicted,
                      "connection_limit_reached": self.limit_reached, "seconds": round(now - self._since, 1)}
            self._reset()
        self._log("http under pressure", **fields)
        return True

    def install(self) -> None:
        logging.getLogger("waitress.queue").addFilter(self)
        logging.getLogger("waitress").addFilter(self)

    def uninstall(self) -> None:
        logging.getLogger("waitress.queue").removeFilter(self)
        logging.getLogger("waitress").removeFilter(self)

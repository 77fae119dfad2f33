"""Serve the WSGI app with waitress in one background thread, bounded under abuse.

* the socket is bound here, before anything starts, so that every failure (port in use, an
  address that does not resolve or is not ours) is one line naming ``http.listen``;
* waitress reads requests on one event loop (an idle connection costs a descriptor, not a
  thread) and runs the app on ``threads`` workers;
* every connection waiting in the listen queue is accepted at once, not one per turn of the loop
  (a burst of reconnecting tricklers overflowed the queue, and the kernel dropped a probe's SYN);
* ``connection_limit``: past it waitress stops accepting, new connections wait in the listen
  backlog; it is capped at half the process's descriptor limit, so cycles always have some.
  While a connection waits there, the one whose request has been arriving longest (else the one
  idle longest) is closed to give it a slot (httplimits.evictable): tricklers past the cap
  cannot keep the probes out;
* ``GET``/``HEAD`` of ``/-/healthy`` and ``/-/ready`` go to a worker of their own
  (httplimits.ProbeLane), never queued behind scrapes: the server runs ``threads`` + 1 workers;
* ``channel_timeout``: a connection with nothing received and no request in progress for that
  long is closed (idle keep-alives and half-sent requests alike);
* a client that does not read holds no worker thread: waitress's output high-water mark
  (where a worker waits for the client to read) is set out of reach, since the big answers
  are views of the metrics cache (http.Parts), not copies; a connection whose answer has not
  moved for ``timeout`` seconds is closed (httplimits.close_stalled), and at most
  httplimits.MAX_PIPELINED requests received in one go are served (the last with
  ``Connection: close``);
* ``answer_timeout`` (httplimits.py): an answer not sent whole that long after its first byte was
  queued is dropped and its connection closed, however steadily the client reads (a slow drip),
  checked every second;
* ``request_timeout`` (httplimits.py): a request not received whole that long after its first
  byte is closed however steadily it trickles (slowloris), checked every second;
* waitress's per-request warnings under load (a queue for the workers, the connection limit) are
  one summary line a minute (httplimits.Pressure);
* no endpoint takes a body: any ``Content-Length`` > 0 is answered 413 before the body is read,
  a malformed one (``-1``, ``abc``) 400, and the connection is closed after either;
* headers are capped at 8 KiB.
"""

from __future__ import annotations

import resource
import select
import socket
import struct
import threading

from waitress import wasyncore
from waitress.server import BaseWSGIServer, create_server

from ..model import InputError
from .config_http import parse_listen
from .httplimits import (DeadlineChannel, ProbeLane, Pressure, close_late_answers, close_slow_requests,
                         close_stalled, evictable)

__all__ = ["HttpServer", "bind", "connection_limit"]

MAX_HEADER_BYTES = 8192
MAX_EVICT_PER_TURN = 64  # connections closed for room in one turn of the loop, at most
MAX_ACCEPT_PER_TURN = 256  # connections accepted in one turn of the loop, at most (waitress: one)
# waitress parks a worker thread while a connection's unsent output is above this: never, here.
# What is queued are views of cached bytes (http.Parts) or small answers; close_stalled bounds how long.
OUTBUF_NEVER_WAIT = 2**62


def bind(listen: str, backlog: int) -> socket.socket:
    """A listening TCP socket on ``listen`` (HOST:PORT, [IPV6]:PORT); InputError in one line otherwise."""
    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        raise InputError(str(exc), "http.listen") from None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise InputError(f"cannot resolve {host!r}: {getattr(exc, 'strerror', None) or exc}",
                         f"http.listen {listen}") from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT only, never a shared port
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(addr)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen: {exc.strerror or exc}", f"http.listen {listen}") from None
    return sock


def connection_limit(wanted: int) -> int:
    """``wanted``, but at most half the soft RLIMIT_NOFILE (the rest is for cycles and logs)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft // 2))


class HttpServer:
    def __init__(self, app, sock: socket.socket, *, max_connections: int, timeout: int, backlog: int,
                 threads: int, request_timeout: float = 5.0, answer_timeout: float = 30.0,
                 pressure: Pressure | None = None):
        self._map: dict = {}
        self._stop = threading.Event()
        self.socket = sock
        self.connection_limit = connection_limit(max_connections)
        self.request_timeout = request_timeout
        self.answer_timeout = answer_timeout
        self.send_timeout = float(timeout)
        server = create_server(
            app, map=self._map, sockets=[sock], threads=threads, connection_limit=self.connection_limit,
            channel_timeout=timeout, cleanup_interval=1, backlog=backlog,
            max_request_header_size=MAX_HEADER_BYTES, max_request_body_size=1, ident="fairshared",
            asyncore_use_poll=True, expose_tracebacks=False, outbuf_high_watermark=OUTBUF_NEVER_WAIT)
        if not isinstance(server, BaseWSGIServer):  # waitress makes a MultiSocketServer for several sockets
            raise TypeError(f"waitress made a {type(server).__name__} for one socket")
        self.server = server
        # the request deadline: waitress's own maintenance (every cleanup_interval, in the loop's
        # thread) closes idle connections; ours then closes the ones whose request is too slow
        self.server.channel_class = DeadlineChannel
        # /-/healthy and /-/ready on a worker of their own, never queued behind other requests;
        # here and below, methods of this one server replaced (waitress has no hook for them)
        self.lanes = ProbeLane(self.server.task_dispatcher)
        # (waitress hands add_task the channel; types-waitress says a Task)
        self.server.add_task = self.lanes.add_task  # type: ignore[method-assign, assignment]
        idle_check = self.server.maintenance
        self.pressure = pressure or Pressure()

        def maintenance(now):
            idle_check(now)
            channels = self.server.active_channels.values()
            self.pressure.slow(close_slow_requests(channels, self.request_timeout))
            self.pressure.stalled(close_stalled(channels, self.send_timeout))
            self.pressure.late(close_late_answers(channels, self.answer_timeout))

        self.server.maintenance = maintenance  # type: ignore[method-assign]
        self._accept_one = self.server.handle_accept
        self.server.handle_accept = self._accept_waiting  # type: ignore[method-assign]
        self._thread = threading.Thread(target=self._serve, name="http", daemon=True)

    def _accept_waiting(self) -> None:
        """Accept every connection waiting in the listen queue (up to the connection limit), not one
        per turn of the loop as waitress does: 200 slowloris connections closed at their deadline
        together reconnect together, and while a turn at a time took them the queue overflowed
        and the kernel dropped the SYN of whoever came next, a /-/healthy among them, retried by
        its client a second later (1.02 s probes in http_load.py's slowloris phase)."""
        for _ in range(MAX_ACCEPT_PER_TURN):
            if len(self._map) >= self.server.adj.connection_limit:
                return
            before = len(self._map)
            self._accept_one()  # one accept(); nothing when none waits (or it failed, logged)
            if len(self._map) == before:
                return

    def _make_room(self) -> bool:
        """At the connection limit, with a connection waiting in the backlog, close the one that holds
        a slot for the least (httplimits.evictable).  Whether the server is at its limit.  Called
        between two turns of the loop, never inside one: a descriptor closed while the loop polls
        could be reused by the connection it accepts, and that one closed in its place."""
        if len(self._map) < self.server.adj.connection_limit:
            return False
        try:
            waiting = bool(select.select([self.socket], [], [], 0)[0])
        except (OSError, ValueError):
            return True
        if waiting:
            # as many as wait (the listen queue's length), so that a probe behind a stream of
            # reconnecting tricklers is not let in one connection per turn
            closed = 0
            for _ in range(min(self._backlog_length(), MAX_EVICT_PER_TURN)):
                # a dict (descriptor -> channel) in waitress; types-waitress says HTTPChannel
                ch = evictable(self.server.active_channels.values())  # type: ignore[attr-defined]
                if ch is None:
                    break
                ch.handle_close()
                closed += 1
            self.pressure.evict(closed)
        return True

    def _backlog_length(self) -> int:
        """Connections waiting in the listen queue: Linux's TCP_INFO tcpi_unacked for a listening
        socket (1 where it cannot be read: one is known to wait)."""
        try:
            info = self.socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
            return max(1, struct.unpack_from("I", info, 24)[0])
        except (OSError, AttributeError, struct.error):
            return 1

    @property
    def address(self) -> tuple:
        return self.socket.getsockname()

    def start(self) -> None:
        self.pressure.install()
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            # at the limit the loop no longer watches the listening socket: turn often, to see who waits
            full = self._make_room()
            wasyncore.loop(timeout=0.05 if full else 1.0, map=self._map, use_poll=True, count=1)
            self.pressure.flush()
        self._close_all()  # in the loop's own thread: no race with a handler

    def _close_all(self) -> None:
        for d in list(self._map.values()):
            try:
                d.close()
            except OSError:
                pass

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, close every connection, wait up to ``timeout`` s for requests in progress."""
        self._stop.set()
        try:
            self.server.pull_trigger()
        except OSError:
            pass
        if self._thread.ident is not None:
            self._thread.join(timeout)
        else:  # never started (a test that turns the loop itself): no other thread has the map
            self._close_all()
        # waitress adds the timeout to time.time(): any number of seconds (types-waitress says int)
        self.server.task_dispatcher.shutdown(cancel_pending=True, timeout=timeout)  # type: ignore[arg-type]
        self.lanes.shutdown(timeout)
        self.pressure.flush(force=True)
        self.pressure.uninstall()

"""The HTTP front door under attack: the demo daemon with a big queue, slowloris and stuck scrapers.

Runs ``fairshared run --demo`` as a process on 127.0.0.1 with ``source.demo_jobs`` pending jobs
(default 50,000: with the demo's push mode priority and the default metrics.per_job, /metrics
is then ~7 MB in each format), debug logging (one ``metrics formatted``
line per formatting), and, after a warm-up (a cycle, a scrape in each format):

1. **slowloris** — ``--slowloris`` connections (default 200) that send a request one byte every
   ``--trickle`` seconds (default 5) and reconnect as soon as the server closes them, for
   ``--attack`` seconds; meanwhile ``GET /-/healthy`` every 0.2 s and a scraper that alternates
   the Prometheus text and OpenMetrics ``Accept`` headers every second.  Bound: the worst
   ``/-/healthy`` latency < ``--max-healthy`` s (default 1).
2. **stuck scrapers** — ``--stuck`` clients (default 24) each send ``GET /metrics`` (alternating
   formats, a 4 KiB receive buffer) and never read the answer, held for ``--hold`` seconds
   (default 25: a cycle publishes meanwhile, and the server's idle timeout closes them).  Bound:
   the daemon's RSS during the phase exceeds its peak during the warm-up (a whole cycle, both
   formats formatted) by < ``--max-rss-growth`` MB (default 50): what the stuck answers hold
   (references to a cycle's cached bodies, not copies).  Also printed: the growth over the RSS
   sampled after the warm-up, between two cycles, which the bound used to be measured from; it
   counts a cycle's own peak too (~45 MB at 50k jobs in push mode priority), and ``--stuck 0``
   shows how much of it is the scrapers'.
3. **pipelining non-readers** — ``--pipeliners`` clients (default 50) each send 3 ``GET /metrics``
   in one go and never read, held for ``--pipeline-hold`` seconds (default 15); meanwhile
   ``GET /-/healthy`` and a reading ``GET /metrics`` every 0.5 s.  Bound: the worst of each
   < ``--max-healthy`` s (issue 26: 4 such clients silenced every answer for 63 s).
4. **slow-drip readers** — ``--drippers`` clients (default 50) each send 3 ``GET /metrics`` in
   one go and read ``--drip-bytes`` (default 64 KiB) every 0.25 s: ~256 KB/s, the answers always
   moving (so never closed as stalled), for ``--drip-hold`` seconds (default 45, past
   ``http.answer_timeout``, 30 s); meanwhile ``GET /-/healthy`` and a reading ``GET /metrics``
   every 0.5 s.  Bounds: the worst of each < ``--max-healthy`` s, and the daemon closes every
   dripper at the answer deadline (``fairshared_http_connections_closed_total{reason="late_answer"}``
   grows by ``--drippers``).

It prints the figures, the formattings per format and cycle (expected: at most one per format
per published cycle, however many scrapes), the daemon's peak RSS, threads and open descriptors
(what systemd/fairshared.service's MemoryMax=, TasksMax= and LimitNOFILE= are sized from), PASS
or FAIL against each bound, and one JSON line last.  Exit status 1 on any FAIL.

    python benchmarks/http_load.py                      # 50k jobs, 200 slowloris, 24 stuck scrapers
    python benchmarks/http_load.py --jobs 5000 --attack 10
    python benchmarks/http_load.py --stuck 0            # the RSS growth without stuck scrapers
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from soak import fairshared_argv, free_port, percentile

TEXT = "text/plain;version=0.0.4"
OPENMETRICS = "application/openmetrics-text;version=1.0.0"


def tcp_counters() -> dict[str, int]:
    """The kernel's listen-queue overflows and SYN retransmissions (every socket of the host: the
    daemon's and the attackers'): a probe whose SYN was dropped answers a second late."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return {}
    values = dict(zip(lines[0].split(), lines[1].split()))
    return {k: int(values[k]) for k in ("ListenOverflows", "TCPSynRetrans") if k in values}


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS (KiB), Threads and open descriptors of ``pid``."""
    out = {"fds": len(os.listdir(f"/proc/{pid}/fd"))}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "Threads"):
            out[key] = int(value.split()[0])
    return out


class Sampler(threading.Thread):
    """Samples the daemon's RSS, threads and descriptors every 0.2 s; keeps the peaks per phase."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.phase, self.stop = pid, "warm-up", threading.Event()
        self.peak: dict[str, dict[str, int]] = {}

    def run(self):
        while not self.stop.is_set():
            try:
                st = proc_status(self.pid)
            except OSError:
                return
            peak = self.peak.setdefault(self.phase, {})
            for k, v in st.items():
                peak[k] = max(peak.get(k, 0), v)
            time.sleep(0.2)


def get(port: int, path: str, accept: str | None = None, timeout: float = 30) -> tuple[float, int]:
    headers = {"Accept": accept} if accept else {}
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        n = len(r.read())
    return time.monotonic() - t0, n


def slowloris(port: int, n: int, every: float, stop: threading.Event, stats: dict) -> None:
    """``n`` connections trickling a request a byte every ``every`` s; reconnect when closed."""
    request = b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 100000
    conns: list[list] = []  # [socket, bytes sent]

    def connect():
        s = socket.socket()
        s.settimeout(5)
        s.connect(("127.0.0.1", port))
        s.setblocking(False)
        stats["opened"] += 1
        return [s, 0]

    conns = [connect() for _ in range(n)]
    while not stop.wait(every):
        for c in conns:
            try:
                closed = c[0].recv(1) == b""
            except BlockingIOError:
                closed = False
            except OSError:
                closed = True
            if not closed:
                try:
                    c[0].send(request[c[1]:c[1] + 1])
                    c[1] += 1
                    continue
                except OSError:
                    pass
            stats["closed_by_server"] += 1
            c[0].close()
            c[:] = connect()
            c[0].send(request[:1])
            c[1] = 1
    for c in conns:
        c[0].close()


def probe(port: int, stop: threading.Event, latencies: list[float], errors: list[str],
          slow: list[tuple[str, float]] | None = None) -> None:
    """``GET /-/healthy`` every 0.2 s; ``slow``: the wall time (UTC) and latency of those over 0.5 s,
    to find in the daemon's log."""
    while not stop.wait(0.2):
        t = time.time()
        try:
            latencies.append(get(port, "/-/healthy", timeout=10)[0])
        except OSError as exc:
            errors.append(str(exc))
            latencies.append(10.0)
        if slow is not None and latencies[-1] > 0.5:
            slow.append((time.strftime("%H:%M:%S", time.gmtime(t)) + f"{t % 1:.3f}"[1:], round(latencies[-1], 3)))


def scraper(port: int, stop: threading.Event, latencies: list[float]) -> None:
    i = 0
    while not stop.wait(1.0):
        try:
            latencies.append(get(port, "/metrics", (TEXT, OPENMETRICS)[i % 2])[0])
        except OSError:
            latencies.append(30.0)
        i += 1


def pipeliners(port: int, n: int) -> list[socket.socket]:
    socks = []
    for i in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        accept = (TEXT, OPENMETRICS)[i % 2]
        s.sendall(f"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\n\r\n".encode() * 3)
        socks.append(s)
    return socks


def drippers(port: int, n: int, chunk: int, stop: threading.Event, stats: dict) -> None:
    """``n`` clients that each send 3 GET /metrics in one go, then read ``chunk`` bytes each every
    0.25 s until ``stop``; ``stats``: bytes read, and those that saw the end of the stream."""
    socks = []
    for i in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        s.connect(("127.0.0.1", port))
        accept = (TEXT, OPENMETRICS)[i % 2]
        s.sendall(f"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\n\r\n".encode() * 3)
        s.setblocking(False)
        socks.append(s)
    ended: set[int] = set()
    while not stop.wait(0.25):
        for i, s in enumerate(socks):
            if i in ended:
                continue
            try:
                got = s.recv(chunk)
            except BlockingIOError:
                continue
            except OSError:
                got = b""
            stats["bytes"] += len(got)
            if not got:
                ended.add(i)
    stats["ended"] = len(ended)
    for s in socks:
        s.close()


def closes(port: int) -> dict[str, float]:
    """fairshared_http_connections_closed_total by reason, from a scrape."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept": TEXT})
    with urllib.request.urlopen(req, timeout=30) as r:
        text = r.read().decode()
    return {m[1]: float(m[2]) for m in
            re.finditer(r'^fairshared_http_connections_closed_total\{reason="(\w+)"\} (\S+)$', text, re.M)}


def closed_by_server(s: socket.socket) -> bool:
    """Whether the server closed ``s`` (what it sent before is read and dropped)."""
    s.settimeout(0.2)
    try:
        while s.recv(1 << 20):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=50000, help="pending jobs in the demo queue (default 50000)")
    ap.add_argument("--period", type=float, default=15.0, help="seconds between cycles (default 15)")
    ap.add_argument("--slowloris", type=int, default=200, help="slowloris connections (default 200)")
    ap.add_argument("--trickle", type=float, default=5.0, help="seconds between their bytes (default 5)")
    ap.add_argument("--attack", type=float, default=30.0, help="seconds the slowloris lasts (default 30)")
    ap.add_argument("--stuck", type=int, default=24, help="scrapers that never read (default 24)")
    ap.add_argument("--hold", type=float, default=25.0, help="seconds they are held (default 25)")
    ap.add_argument("--pipeliners", type=int, default=50,
                    help="clients sending 3 pipelined GET /metrics and never reading (default 50)")
    ap.add_argument("--pipeline-hold", type=float, default=15.0, help="seconds they are held (default 15)")
    ap.add_argument("--drippers", type=int, default=50,
                    help="clients sending 3 pipelined GET /metrics and reading them slowly (default 50)")
    ap.add_argument("--drip-bytes", type=int, default=65536,
                    help="bytes each reads every 0.25 s (default 65536: ~256 KB/s)")
    ap.add_argument("--drip-hold", type=float, default=45.0,
                    help="seconds they read (default 45: past http.answer_timeout, 30 s)")
    ap.add_argument("--max-healthy", type=float, default=1.0,
                    help="bound on /-/healthy latency, s (default 1)")
    ap.add_argument("--max-rss-growth", type=float, default=50.0, help="bound on RSS growth, MB (default 50)")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="fairshared-http-load-"))
    cfg = tmp / "fairshared.toml"
    cfg.write_text(f'[source]\ndemo_jobs = {args.jobs}\n[logging]\nformat = "json"\nlevel = "debug"\n'
                   f'[state]\ndirectory = "{tmp}/state"\n')
    port = free_port()
    log_path = tmp / "daemon.log"
    with open(log_path, "w") as log:  # the child has its own descriptor for it
        proc = subprocess.Popen(fairshared_argv() + ["run", "--demo", "--config", str(cfg),
                                                     "--period", str(args.period),
                                                     "--listen", f"127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    sampler = Sampler(proc.pid)
    results: dict = {"jobs": args.jobs}
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/status", timeout=5) as r:
                    if json.loads(r.read())["cycle"]:
                        break
            except (OSError, ValueError, KeyError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the daemon did not come up:\n{log_path.read_text()[-2000:]}")
            time.sleep(0.5)
        sampler.start()
        for accept in (TEXT, OPENMETRICS, TEXT, OPENMETRICS):  # warm-up: both formats formatted once
            _, size = get(port, "/metrics", accept)
        results["metrics_bytes"] = size
        time.sleep(args.period)  # a second cycle, and its formatting
        get(port, "/metrics", TEXT)
        get(port, "/metrics", OPENMETRICS)
        base = proc_status(proc.pid)
        results["rss_after_warmup_mb"] = round(base["VmRSS"] / 1024, 1)
        warm_peak = max(base["VmRSS"], sampler.peak.get("warm-up", {}).get("VmRSS", 0))
        results["rss_warmup_peak_mb"] = round(warm_peak / 1024, 1)

        # 1. slowloris, with probes and a normal scraper
        sampler.phase = "slowloris"
        tcp = tcp_counters()
        stop = threading.Event()
        healthy: list[float] = []
        scrapes: list[float] = []
        errors: list[str] = []
        slow: list[tuple[str, float]] = []
        loris = {"opened": 0, "closed_by_server": 0}
        threads = [threading.Thread(target=slowloris, args=(port, args.slowloris, args.trickle, stop, loris)),
                   threading.Thread(target=probe, args=(port, stop, healthy, errors, slow)),
                   threading.Thread(target=scraper, args=(port, stop, scrapes))]
        for t in threads:
            t.start()
        time.sleep(args.attack)
        stop.set()
        for t in threads:
            t.join(60)
        after = tcp_counters()
        results["slowloris_tcp"] = {k: after[k] - tcp[k] for k in tcp}
        results["healthy_over_half_s"] = slow
        results.update(healthy_probes=len(healthy), healthy_max_s=round(max(healthy), 3),
                       healthy_p50_s=round(percentile(healthy, 50), 3), healthy_errors=len(errors),
                       scrapes_during_attack=len(scrapes), scrape_max_s=round(max(scrapes), 2),
                       slowloris_connections_opened=loris["opened"],
                       slowloris_closed_by_server=loris["closed_by_server"])

        # 2. scrapers that never read
        sampler.phase = "stuck scrapers"
        stuck = []
        rss = [proc_status(proc.pid)["VmRSS"]]
        for i in range(args.stuck):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", port))
            accept = (TEXT, OPENMETRICS)[i % 2]
            s.sendall(f"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\n\r\n".encode())
            stuck.append(s)
        end = time.monotonic() + args.hold
        while time.monotonic() < end:
            rss.append(proc_status(proc.pid)["VmRSS"])
            time.sleep(0.25)
        healthy_after = get(port, "/-/healthy")[0]
        for s in stuck:
            s.close()
        results.update(stuck_scrapers=args.stuck, rss_growth_mb=round((max(rss) - warm_peak) / 1024, 1),
                       rss_growth_over_sample_mb=round((max(rss) - base["VmRSS"]) / 1024, 1),
                       healthy_after_stuck_s=round(healthy_after, 3))

        # 3. clients that pipeline scrapes and never read
        sampler.phase = "pipeliners"
        held = pipeliners(port, args.pipeliners)
        p_healthy, p_scrapes = [], []
        end = time.monotonic() + args.pipeline_hold
        while time.monotonic() < end:
            for path, into in (("/-/healthy", p_healthy), ("/metrics", p_scrapes)):
                try:
                    into.append(get(port, path, timeout=10)[0])
                except OSError:
                    into.append(10.0)
            time.sleep(0.5)
        closed = sum(closed_by_server(s) for s in held)
        for s in held:
            s.close()
        results.update(pipeliners=args.pipeliners, pipeline_healthy_max_s=round(max(p_healthy), 3),
                       pipeline_scrape_max_s=round(max(p_scrapes), 3), pipeline_probes=len(p_healthy),
                       pipeliners_closed_by_server=closed)

        # 4. clients that read their answers slowly but steadily
        sampler.phase = "slow-drip readers"
        time.sleep(2)
        late_before = closes(port).get("late_answer", 0)
        stop = threading.Event()
        drip = {"bytes": 0, "ended": 0}
        dripping = threading.Thread(target=drippers, args=(port, args.drippers, args.drip_bytes, stop, drip))
        dripping.start()
        d_healthy, d_scrapes = [], []
        end = time.monotonic() + args.drip_hold
        while time.monotonic() < end:
            for path, into in (("/-/healthy", d_healthy), ("/metrics", d_scrapes)):
                try:
                    into.append(get(port, path, timeout=10)[0])
                except OSError:
                    into.append(10.0)
            time.sleep(0.5)
        stop.set()
        dripping.join(60)
        late = closes(port).get("late_answer", 0) - late_before
        results.update(drippers=args.drippers, drip_healthy_max_s=round(max(d_healthy), 3),
                       drip_scrape_max_s=round(max(d_scrapes), 3), drip_probes=len(d_healthy),
                       drip_mb_read=round(drip["bytes"] / 1e6, 1), drippers_ended=drip["ended"],
                       drippers_closed_late=int(late))
    finally:
        sampler.stop.set()
        if proc.poll() is None:
            proc.terminate()
            proc.wait(60)

    events = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    cycles = [e for e in events if e.get("event") == "cycle"]
    formatted = [e for e in events if e.get("event") == "metrics formatted"]
    by_type: dict[str, int] = {}
    for e in formatted:
        by_type[e["content_type"]] = by_type.get(e["content_type"], 0) + 1
    pressure = [e for e in events if e.get("event") == "http under pressure"]
    peak = {k: max(p.get(k, 0) for p in sampler.peak.values()) for k in ("VmRSS", "Threads", "fds")}
    results.update(cycles=len(cycles), formattings=len(formatted), formattings_by_type=by_type,
                   format_seconds_max=max((e["seconds"] for e in formatted), default=0),
                   pressure_log_lines=len(pressure), log_lines=len(events),
                   peak_rss_mb=round(peak["VmRSS"] / 1024, 1), peak_threads=peak["Threads"],
                   peak_fds=peak["fds"],
                   peaks_by_phase={ph: {"rss_mb": round(p.get("VmRSS", 0) / 1024, 1),
                                        "threads": p.get("Threads"), "fds": p.get("fds")}
                                   for ph, p in sampler.peak.items()})

    ok_healthy = results["healthy_max_s"] < args.max_healthy and not results["healthy_errors"]
    ok_rss = results["rss_growth_mb"] < args.max_rss_growth
    ok_pipeline = max(results["pipeline_healthy_max_s"], results["pipeline_scrape_max_s"]) < args.max_healthy
    ok_drip = (max(results["drip_healthy_max_s"], results["drip_scrape_max_s"]) < args.max_healthy
               and results["drippers_closed_late"] >= args.drippers)
    ok_render = all(n <= len(cycles) for n in by_type.values())  # at most one per format per cycle
    print(f"demo daemon, {args.jobs} pending jobs, /metrics {results['metrics_bytes'] / 1e6:.1f} MB, "
          f"{len(cycles)} cycles {args.period:g} s apart, "
          f"RSS after warm-up {results['rss_after_warmup_mb']} MB")
    print(f"slowloris: {args.slowloris} connections, a byte every {args.trickle:g} s, {args.attack:g} s "
          f"({loris['opened']} opened, {loris['closed_by_server']} closed by the server at the request "
          f"deadline)")
    print(f"  /-/healthy: {len(healthy)} probes, max {results['healthy_max_s']} s, "
          f"p50 {results['healthy_p50_s']} s, "
          f"{len(errors)} errors  (bound < {args.max_healthy:g} s)  {'PASS' if ok_healthy else 'FAIL'}")
    if results["slowloris_tcp"]:
        print("  meanwhile in the kernel: " + ", ".join(f"{k} +{v}" for k, v in results["slowloris_tcp"].items()))
    print(f"  /metrics alongside: {len(scrapes)} scrapes, max {results['scrape_max_s']} s")
    print(f"stuck scrapers: {args.stuck} that send GET /metrics and never read, {args.hold:g} s")
    print(f"  RSS growth over the warm-up's peak ({results['rss_warmup_peak_mb']} MB): "
          f"{results['rss_growth_mb']} MB  (bound < {args.max_rss_growth:g} MB)  {'PASS' if ok_rss else 'FAIL'};  "
          f"over the after-warm-up sample: {results['rss_growth_over_sample_mb']} MB;  /-/healthy meanwhile "
          f"{results['healthy_after_stuck_s']} s")
    print(f"pipelining non-readers: {args.pipeliners} clients x 3 GET /metrics, never read, "
          f"{args.pipeline_hold:g} s ({closed} closed by the server, answer stalled)")
    print(f"  /-/healthy max {results['pipeline_healthy_max_s']} s, reading /metrics max "
          f"{results['pipeline_scrape_max_s']} s, {len(p_healthy)} of each  "
          f"(bound < {args.max_healthy:g} s)  "
          f"{'PASS' if ok_pipeline else 'FAIL'}")
    print(f"slow-drip readers: {args.drippers} clients x 3 GET /metrics, {args.drip_bytes} bytes each "
          f"every 0.25 s, {args.drip_hold:g} s ({results['drip_mb_read']} MB read; "
          f"{results['drippers_closed_late']} closed at the answer deadline, {results['drippers_ended']} saw "
          f"the end of their stream)")
    print(f"  /-/healthy max {results['drip_healthy_max_s']} s, reading /metrics max "
          f"{results['drip_scrape_max_s']} s, {len(d_healthy)} of each  (bound < {args.max_healthy:g} s; "
          f"every dripper closed late)  {'PASS' if ok_drip else 'FAIL'}")
    kinds = ", ".join(f"{k.split(';')[0]} {v}" for k, v in sorted(by_type.items()))
    print(f"formattings of /metrics: {len(formatted)} in {len(cycles)} cycles ({kinds}; slowest "
          f"{results['format_seconds_max']} s); at most one per format per cycle  "
          f"{'PASS' if ok_render else 'FAIL'}")
    print(f"log: {len(events)} lines, {len(pressure)} 'http under pressure' summaries")
    print(f"daemon peaks: RSS {results['peak_rss_mb']} MB, {peak['Threads']} threads, "
          f"{peak['fds']} open descriptors")
    ok = ok_healthy and ok_rss and ok_render and ok_pipeline and ok_drip
    if ok:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"the daemon's log: {log_path}")
    print("PASS" if ok else "FAIL")
    print(json.dumps(results))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

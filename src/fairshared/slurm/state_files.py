"""The two files of slurmctld's StateSaveLocation that fairshared reads: binary, big-endian.  Pure.

Both are written with Slurm's ``pack`` functions (network byte order), the same in 22.05 to 26.05;
each is replaced as a whole (a new file linked in place), so a read shorter than its 16 bytes is a
read that met the rewrite, not a format change: None, and the caller reads again later.
"""

from __future__ import annotations

import struct


def parse_heartbeat(data: bytes) -> tuple[int, int] | None:
    """``StateSaveLocation/heartbeat``, written by the controller in control every
    min(SlurmctldTimeout/4, 30) s when a backup is configured: the Unix time and the writer's
    SlurmctldHost index, two big-endian uint64 (slurmctld/heartbeat.c, 22.05 to 26.05).  None when
    the file is shorter (being rewritten: it is replaced by a link, so rarely)."""
    if len(data) < 16:
        return None
    written, index = struct.unpack(">QQ", data[:16])
    return written, index


def parse_decay_state(data: bytes) -> tuple[int, int] | None:
    """``StateSaveLocation/priority_last_decay_ran``: pack_time(last_ran), pack_time(last_reset),
    two big-endian int64 (priority_multifactor.c): when slurmctld last decayed usage and
    recalculated every job's priority, and when it last reset usage (0: never).  None when the
    file is shorter."""
    if len(data) < 16:
        return None
    last_ran, last_reset = struct.unpack(">qq", data[:16])
    return last_ran, last_reset


def parse_last_decay_ran(data: bytes) -> int | None:
    """When slurmctld last recalculated every job's priority (0, unset: None)."""
    state = parse_decay_state(data)
    return (state[0] or None) if state else None

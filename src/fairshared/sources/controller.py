"""Which slurmctld is in control: with two head nodes, only the daemon beside the active one pushes.

Sites with a backup controller (``SlurmctldHost`` listed twice) run fairshared on both heads:
both compute and export, and only the one whose own slurmctld is in control pushes.  Asking
``scontrol ping`` cannot tell (it reports both UP, and ``scontrol update`` reaches whichever is in
control from anywhere), so this asks the controller itself, right before each push batch:

* Slurm 25.11 and later: ``GET /readyz`` on the local slurmctld's own address and port answers 204
  only while it is in control (``slurmctld/http.c`` 25.11.7 ``_req_readyz``: not in standby, not
  reconfiguring), 500 in standby.  slurmctld serves HTTP only when built with libhttp_parser and
  without ``CommunicationParameters=disable_http``; without it, or when it does not answer, the
  heartbeat below decides.
* Every release (22.05 to 26.05): the ``heartbeat`` file in StateSaveLocation, which the
  controller in control rewrites every min(SlurmctldTimeout/4, 30) s with the time and its own
  SlurmctldHost index (``slurmctld/heartbeat.c``).  Ours is in control when the index is ours and
  the file is fresher than SlurmctldTimeout (a stale one means the writer may be dead and the
  backup about to take over: nobody pushes meanwhile), and its slurmctld accepts connections (the
  file outlives a killed writer by up to SlurmctldTimeout).  The file is SlurmUser's, created
  0600 and replaced every few seconds, so no ACL opens it to another user: before 25.11, on two
  head nodes, fairshared runs as SlurmUser (see the README).

Which SlurmctldHost is this daemon's: ``controller.host`` in the config, else the entry named like
this machine (short or full host name, as slurmctld itself decides, ``controller.c``
``_controller_index``).  Anything that cannot be decided is *standby*: a double push is worse
than a cycle without one.  ``controller.push_when = "always"`` turns the check off (one daemon per
cluster, on a machine that is not a head node).
"""

from __future__ import annotations

import http.client
import os
import socket
import time

from ..model import Controllers
from ..records import Role
from ..slurm.state_files import parse_heartbeat
from ..slurm.versions import READYZ

__all__ = ["ControllerCheck"]

READYZ_TIMEOUT = 2.0  # seconds for slurmctld's HTTP probe; past it the heartbeat decides
HEARTBEAT_TRIES = 3  # the file is rewritten as unlink + link: a read may miss it (get_last_heartbeat retries too)


class ControllerCheck:
    def __init__(self, host: str | None = None, push_when: str = "active", hostnames: tuple[str, ...] | None = None):
        self.host = host
        self.push_when = push_when
        # this machine's names as slurmctld compares them (gethostname, short and full)
        full = socket.gethostname()
        self.hostnames = hostnames if hostnames is not None else (full.split(".")[0], full)

    def my_index(self, ctl: Controllers) -> int | None:
        names = [name for name, _ in ctl.hosts]
        if self.host is not None:
            return names.index(self.host) if self.host in names else None
        for i, name in enumerate(names):
            if name in self.hostnames:
                return i
        return None

    def role(self, ctl: Controllers | None, now: float | None = None) -> Role:
        if self.push_when == "always":
            return Role(True, self.host, "controller.push_when = always: no check")
        if ctl is None:
            return Role(True, None, "the source names no slurmctld hosts (demo or offline)")
        if len(ctl.hosts) <= 1:
            return Role(True, ctl.hosts[0][0] if ctl.hosts else None, "one SlurmctldHost: no backup to defer to")
        i = self.my_index(ctl)
        names = ", ".join(name for name, _ in ctl.hosts)
        if i is None:
            who = f"controller.host {self.host!r}" if self.host else f"this host ({self.hostnames[-1]})"
            return Role(False, None, f"{who} is none of SlurmctldHost {names}: pushing nowhere (set "
                                     f"controller.host, or controller.push_when = 'always' for the one daemon)",
                        fault=True)
        name, addr = ctl.hosts[i]
        if ctl.release >= READYZ:
            answer = readyz(addr, ctl.port)
            if answer is not None:
                return Role(answer == 204, name, f"GET /readyz at {name}({addr}):{ctl.port}: {answer}")
        return self._heartbeat(ctl, i, now if now is not None else time.time())

    def _heartbeat(self, ctl: Controllers, i: int, now: float) -> Role:
        name = ctl.hosts[i][0]
        if not ctl.state_save_location:
            return Role(False, name, "no StateSaveLocation to read the heartbeat from", fault=True)
        path = os.path.join(ctl.state_save_location, "heartbeat")
        for attempt in range(HEARTBEAT_TRIES):
            try:
                with open(path, "rb") as fh:
                    beat = parse_heartbeat(fh.read(16))
                break
            except FileNotFoundError:  # between the unlink and the link of a rewrite: as Slurm, try again
                if attempt + 1 == HEARTBEAT_TRIES:
                    return Role(False, name, f"cannot read {path}: no such file", fault=True)
                time.sleep(0.1)
            except PermissionError:
                # slurmctld creates it 0600 and replaces it every few seconds: no ACL can open it to
                # another user (the create mode masks a named entry out); see the README
                return Role(False, name, f"cannot read {path}: permission denied (it is SlurmUser's, mode "
                                         f"0600: before Slurm 25.11 run fairshared as SlurmUser on two "
                                         f"head nodes)", fault=True)
            except OSError as exc:
                return Role(False, name, f"cannot read {path}: {exc.strerror or exc}", fault=True)
        if beat is None:
            return Role(False, name, f"{path} is shorter than 16 bytes")
        written, index = beat
        age = now - written
        writer = ctl.hosts[index][0] if index < len(ctl.hosts) else f"index {index}"
        if age > ctl.timeout:
            return Role(False, name, f"heartbeat from {writer} is {age:.0f} s old (SlurmctldTimeout "
                                     f"{ctl.timeout} s): a takeover may be under way")
        if index != i:
            return Role(False, name, f"heartbeat: {writer} in control ({age:.0f} s ago)")
        # the heartbeat outlives its writer by up to SlurmctldTimeout: a killed slurmctld's file
        # still names it, and the backup has not taken over yet; a controller in control listens
        addr = ctl.hosts[i][1]
        if not accepts(addr, ctl.port):
            return Role(False, name, f"heartbeat names {name} ({age:.0f} s ago) but nothing listens at "
                                     f"{addr}:{ctl.port}: it is down, a takeover will follow")
        return Role(True, name, f"heartbeat: {writer} in control ({age:.0f} s ago)")


def accepts(addr: str, port: int, timeout: float = READYZ_TIMEOUT) -> bool:
    """Does anything accept a TCP connection at ``addr:port`` (closed at once, nothing sent)?"""
    try:
        socket.create_connection((addr, port), timeout=timeout).close()
        return True
    except OSError:
        return False


def readyz(addr: str, port: int, timeout: float = READYZ_TIMEOUT) -> int | None:
    """The HTTP status of slurmctld's ``GET /readyz``; None when it does not answer over HTTP (not
    running, an older or HTTP-less build: the heartbeat decides then)."""
    conn = http.client.HTTPConnection(addr, port, timeout=timeout)
    try:
        conn.request("GET", "/readyz", headers={"Connection": "close"})
        return conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()

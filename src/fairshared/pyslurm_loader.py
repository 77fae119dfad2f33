"""Loading pyslurm, and libslurm under it, without letting libslurm end the process.

Both the pyslurm source (``sources/pyslurm_source.py``) and the pyslurm job updater
(``sinks/push_pyslurm.py``) load it, so it sits below both.  :func:`import_pyslurm` raises
:class:`~fairshared.records.SourceError`; the updater turns that into a PushError.
"""

from __future__ import annotations

from .records import SourceError

_PROBE = """
import os, sys
os.environ["PYSLURM_DISABLE_AUTO_INIT"] = "1"
import pyslurm
pyslurm.slurm_init(sys.argv[1] or None)
print(pyslurm.settings.LOCAL_CLUSTER)
"""


_NOT_INSTALLED = ("pyslurm is not installed; pip install 'fairshared[pyslurm]' on a host with Slurm 25.11, "
                  "or use the command-line source")


def import_pyslurm(*, probe_timeout: float = 60.0):
    """Import pyslurm and initialise libslurm, or raise :class:`SourceError`; never exit.

    ``import pyslurm`` calls libslurm's ``slurm_init()`` unless ``PYSLURM_DISABLE_AUTO_INIT``
    is set (``pyslurm:pyslurm/__init__.py``), and ``slurm_init()`` calls ``fatal()``, which
    ends the process with exit 1 and no Python exception, when it finds no slurm.conf
    (``$SLURM_CONF``, else the path compiled into libslurm) or cannot parse it.  So the
    import runs with auto-init off, a child process first makes the very call this process
    would make (same interpreter, same environment), and only when the child lives does
    this process call ``pyslurm.slurm_init()``.  The child's last line from libslurm names
    what was wrong.  pyslurm also turns on ``RTLD_GLOBAL|RTLD_DEEPBIND`` for every later
    ``dlopen`` of the process; the flags are put back.

    A pyslurm that is already imported (by whoever imported it first) is returned as it is.
    """
    import os
    import subprocess
    import sys

    if "pyslurm" in sys.modules:
        if sys.modules["pyslurm"] is None:  # imports of it are blocked
            raise SourceError(_NOT_INSTALLED)
        return sys.modules["pyslurm"]

    conf = os.environ.get("SLURM_CONF", "")
    try:
        probe = subprocess.run([sys.executable, "-c", _PROBE, conf], capture_output=True, text=True,
                               timeout=probe_timeout, stdin=subprocess.DEVNULL, errors="replace")
    except subprocess.TimeoutExpired:
        raise SourceError(f"loading pyslurm did not finish within {probe_timeout:g} s") from None
    if probe.returncode != 0:
        lines = [ln.strip() for ln in probe.stderr.splitlines() if ln.strip()]
        if any("ModuleNotFoundError" in ln and "pyslurm" in ln for ln in lines):
            raise SourceError(_NOT_INSTALLED)
        why = "; ".join(lines[-2:]) or f"exit {probe.returncode}"
        raise SourceError(f"pyslurm cannot initialise libslurm with "
                          f"{'SLURM_CONF=' + conf if conf else 'its built-in slurm.conf path'}: {why}")
    flags = sys.getdlopenflags()
    had = os.environ.get("PYSLURM_DISABLE_AUTO_INIT")
    os.environ["PYSLURM_DISABLE_AUTO_INIT"] = "1"
    try:
        import pyslurm  # noqa: PLC0415 - lazy on purpose: the module imports without pyslurm
    except Exception as exc:  # noqa: BLE001 - e.g. OSError from dlopen of libslurmfull.so
        raise SourceError(f"pyslurm failed to load: {type(exc).__name__}: {exc}") from None
    finally:
        sys.setdlopenflags(flags)
        if had is None:
            os.environ.pop("PYSLURM_DISABLE_AUTO_INIT", None)
        else:
            os.environ["PYSLURM_DISABLE_AUTO_INIT"] = had
    pyslurm.slurm_init(conf or None)
    return pyslurm

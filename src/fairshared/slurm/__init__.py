"""Every Slurm text format and unit fairshared reads, each parsed once.  Pure functions, no I/O.

A low layer: these modules import only :mod:`fairshared.model` and the standard library, and
nothing here runs a command or opens a file (the command lines and reads are in
:mod:`fairshared.sources`).  Import from the defining module:

* :mod:`.units` — NO_VAL/INFINITE/NICE_OFFSET, the unit letters K..P and each TRES's base unit,
  Slurm time strings, squeue TimeLimit, partition MaxTime, ``%s`` epoch times;
* :mod:`.tres` — TRES count strings (squeue, scontrol, sacct) and TRES weights
  (PriorityWeightTRES, TRESBillingWeights);
* :mod:`.config` — ``scontrol show config`` and slurm.conf's PriorityFlags;
* :mod:`.versions` — the release a text came from and what changed between 22.05 and 26.05;
* :mod:`.assoc_mgr` — ``scontrol show assoc_mgr flags=assoc``;
* :mod:`.sacctmgr` — ``sacctmgr -nP show assoc`` / ``show qos``;
* :mod:`.scontrol` — ``scontrol -o show partition`` / ``show node``;
* :mod:`.squeue`, :mod:`.sprio` — the jobs and what sprio adds to them;
* :mod:`.sshare` — ``sshare -a -l -P``, live or as a dump file;
* :mod:`.state_files` — the heartbeat and ``priority_last_decay_ran`` files of StateSaveLocation.

sacct's job lines are read in :mod:`fairshared.sources.sacct` (they become usage records), with
the TRES counts of :func:`.tres.parse_tres_exact`.
"""

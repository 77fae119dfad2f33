"""The daemon: the imperative shell around the engine (config, cycle loop, signals)."""

"""The exposition's formats: which one a scrape's ``Accept`` header is served (at most two a cycle,
whatever the headers), and families encoded one at a time.  Pure functions over
prometheus-client's encoders."""

from __future__ import annotations

from typing import Iterable

from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, choose_encoder

NS = "fairshared"

def _known_content_types() -> frozenset[str]:
    """Every content type prometheus-client's negotiation gives for the versions and escapings it
    knows.  choose_encoder() copies an OpenMetrics ``version=`` from the Accept header into the
    type, so ``version=1.0.01``, ``1.0.02``, ... would each be a format of its own: each formatted
    anew (a second of CPU at 50k jobs) and cached (11 MB).  Anything else gets the text format."""
    types = {choose_encoder("")[1], choose_encoder("application/openmetrics-text")[1]}
    for kind, versions in (("application/openmetrics-text", ("1.0.0", "2.0.0")), ("text/plain", ("1.0.0",))):
        for version in versions:
            for escaping in ("underscores", "allow-utf-8", "dots", "values"):
                types.add(choose_encoder(f"{kind};version={version};escaping={escaping}")[1])
    return frozenset(types)


KNOWN_CONTENT_TYPES = _known_content_types()
OPENMETRICS = choose_encoder("application/openmetrics-text")  # version 1.0.0, escaping=underscores


def serving_format(accept: str | None) -> tuple:
    """(encoder, content type) for an ``Accept`` header: OpenMetrics 1.0.0 when prometheus-client's
    negotiation picks a known OpenMetrics type, else the text format 0.0.4.  Its 14 known types
    (versions × name escapings) were each formatted and cached per cycle (187 distinct headers: 12
    formattings of 72 MB in one cycle); fairshared's names and label names are all legacy names,
    which every escaping leaves as they are, so these two say the truth about the bytes for any."""
    encoder, ctype = choose_encoder(accept or "")
    if ctype in KNOWN_CONTENT_TYPES and ctype.startswith("application/openmetrics-text"):
        return OPENMETRICS
    return generate_latest, CONTENT_TYPE_PLAIN_0_0_4


def gauge(name: str, doc: str, samples: Iterable[tuple[dict, float]]) -> GaugeMetricFamily:
    samples = list(samples)
    keys = list(samples[0][0]) if samples else []
    g = GaugeMetricFamily(f"{NS}_{name}", doc, labels=keys)
    for labels, value in samples:
        g.add_metric([labels[k] for k in keys], value)
    return g


_EOF = b"# EOF\n"


def encode_each(encoder, families: Iterable[Metric]) -> bytes:
    """``encoder`` over all ``families``, one family at a time: the same bytes as one call over
    them all (an OpenMetrics ``# EOF`` once, at the end), while only one family's lines exist as
    strings at a time.  One call builds every line of every family before joining them: at
    100,000 associations and jobs (93 MB of text) that held ~140 MB of line strings beside the
    joined text and its encoding (``benchmarks/metrics_scale.py`` prints the peak)."""
    parts = []
    eof = False
    for family in families:
        part = encoder(_Fixed((family,)))
        if part.endswith(_EOF):
            part, eof = part[:-len(_EOF)], True
        parts.append(part)
    if eof or not parts:
        tail = encoder(_Fixed(()))  # what the format ends with when there is nothing (OpenMetrics: # EOF)
        parts.append(tail)
    return b"".join(parts)


class _Fixed:
    """A collector over families already built (generate_latest() only calls collect())."""

    def __init__(self, families: Iterable[Metric]):
        self.families = families

    def collect(self):
        return self.families

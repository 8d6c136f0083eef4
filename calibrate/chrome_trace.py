"""Writes a torch.profiler run as a Chrome trace (the scripts' --trace; twin compare --kineto)."""
from __future__ import annotations

import gzip
import os
import tempfile


def write_chrome_trace(prof: object, path: str) -> None:
    """The profile's Chrome trace at `path`, gzip-compressed (no name or time in the header: the
    same bytes for the same trace) when the path ends in .gz."""
    with tempfile.TemporaryDirectory() as d:
        raw = os.path.join(d, "trace.json")
        prof.export_chrome_trace(raw)
        with open(raw, "rb") as f:
            data = f.read()
    if path.endswith(".gz"):
        with gzip.GzipFile(path, "wb", mtime=0) as g:
            g.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)

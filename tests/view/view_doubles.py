"""Scripted answers for the sample-viewer tests: ratings, free text, hostile markup and backend errors."""
from __future__ import annotations

import hashlib

#: an answer that would run script if the page inserted model text as HTML (also closes the data <script> element)
HOSTILE = '</script><script>window.__pwned = "script"</script><img src=x onerror="window.__pwned = \'img\'">'


def _bucket(req) -> int:
    return int(hashlib.sha256(req.messages[-1][1].encode()).hexdigest(), 16) % 10


def scripted_answer(req) -> str:
    """Pointwise answers: mostly a rating, sometimes hostile markup (unparseable), sometimes a backend error."""
    b = _bucket(req)
    if b == 0:
        raise RuntimeError("HTTP 503 <b>overloaded</b>")
    if b == 1:
        return HOSTILE
    return "The rating is 4 stars" if b == 2 else str(1 + b % 5)

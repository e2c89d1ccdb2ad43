"""Bounded claim loops: a create-if-absent claim lost to other writers is retried with backoff and
jitter a fixed number of times, then refused with ABORTED naming what contended."""

from __future__ import annotations

import random
import time
from typing import Iterator

from cas.errors import Aborted

ATTEMPTS = 25       # claims of one number before giving up
FIRST_PAUSE = 0.002  # seconds before the second attempt; doubles up to MAX_PAUSE
MAX_PAUSE = 0.25


def pause(attempt: int) -> float:
    """The pause before attempt `attempt` (1, 2, ...): exponential, with full jitter, so that
    writers that collided once do not collide again in step."""
    return random.uniform(0, min(MAX_PAUSE, FIRST_PAUSE * 2 ** attempt))


def attempts(what: str, **fields) -> Iterator[int]:
    """Yield 0, 1, ... ATTEMPTS-1, pausing between them; when the caller asks for one more
    (every claim was lost), raise ABORTED saying what was contended."""
    for n in range(ATTEMPTS):
        if n:
            time.sleep(pause(n))
        yield n
    raise Aborted(f"could not claim {what}: another writer won {ATTEMPTS} times in a row "
                  "(too many concurrent writers); nothing was written; retry",
                  reason="CLAIM_CONTENDED", contended=what, attempts=ATTEMPTS, **fields)

"""Leases: who is writing, collecting garbage or erasing right now (docs/format.md, section 9).

A writer holds a lease from before it decides which stored objects it reuses until after it
claims the record that names them. gc and erasure first publish their own lease, then list the
leases of others. Each side writes before it reads, so of any writer and any gc (or erasure) at
least one sees the other: a writer that started first is waited for, and a writer that started
later sees what the gc may delete (and keeps clear of it) or that an erasure is in progress (and
waits for it). This holds across processes and machines, on a local directory and on S3, with
create-if-absent and delete alone; time only decides when a lease whose holder died is dead.
The functions take the repository context `ctx` (cas.repo.context.Context: its `backend` and its
clock `time`), passed in by the operation that holds the lease.
"""

from __future__ import annotations

import datetime as _dt
import os
import random
import time
from typing import Iterable

import msgspec

from cas.errors import Aborted, CasError, NotFound
from cas.format.keys import LEASES, ROLES, lease_key, parse_lease_key
from cas.format.records import Lease, format_record_file, parse_record_file
from cas.storage.backends.local import host_name

WRITER, GC, ERASURE = ROLES
MERGE = "merge small packs"  # the operation of a writer's gc lease (maintenance.merge_packs)
# The operations a lease of each role names (docs/format.md 4.9), as its holders write them:
# fsck reports any other. A writer's: a direct commit (an eval-set capture is one), the staging
# of a promotion or a removal, a seal, a run import, a review batch, a cassette save.
OPERATIONS = {WRITER: ("commit", "promote", "remove", "seal", "import", "review",
                       "record cassettes", "record a suite result"),
              GC: ("gc", MERGE), ERASURE: ("erase",)}
TTL = 300.0        # seconds a lease lives unless renewed; holders renew after a third of it
MARGIN = 30.0      # a writer does not claim once its lease is this close to expiry (clock skew)
WRITER_WAIT = 60.0   # how long a writer waits for an erasure in progress before ABORTED
GC_WAIT = 60.0       # how long gc waits for the writers that started before it
ERASURE_WAIT = TTL + MARGIN  # how long an erasure waits for the writers that started before it
POLL = 0.05          # first pause between two looks at the leases (doubles up to 1 s)

_HOST = host_name()


def of_role(leases: Iterable[str], role: str) -> list[str]:
    """The lease keys among `leases` of `role` (told by the key, so a damaged lease too)."""
    return sorted(k for k in leases if parse_lease_key(k)[0] == role)


def iso(seconds: float) -> str:
    return _dt.datetime.fromtimestamp(seconds, _dt.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ")


def seconds_of(text: str) -> float:
    try:
        return _dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=_dt.timezone.utc).timestamp()
    except ValueError:
        return 0.0  # unreadable: long expired


def _alive(record: Lease, now: float) -> bool:
    """A lease is dead once expired, or at once when its holder was a process on this host that
    no longer runs (a killed command must not stall the next gc for minutes)."""
    if seconds_of(record.expires_at) < now:
        return False
    if record.host == _HOST and record.pid != os.getpid():
        try:
            os.kill(record.pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            pass  # exists, owned by someone else
    return True


def live(ctx, roles: Iterable[str] = ROLES, exclude: str | None = None) -> dict[str, Lease]:
    """The live leases (key -> record) of the given roles, except `exclude`."""
    wanted = set(roles)
    now = ctx.time()
    out = {}
    for key in ctx.backend.list(LEASES):
        parsed = parse_lease_key(key)
        if key == exclude or parsed is None or parsed[0] not in wanted:
            continue
        try:
            record = parse_record_file(ctx.backend.get(key), Lease, key)
        except NotFound:
            continue  # released meanwhile
        except CasError:
            # A damaged lease cannot say when it expires: honour it while its file is young.
            try:
                if ctx.backend.modified(key) + TTL >= now:
                    out[key] = None
            except NotFound:
                pass
            continue
        if _alive(record, now):
            out[key] = record
    return out


def wait_for(ctx, keys: Iterable[str], timeout: float, progress=None) -> list[str]:
    """Wait until none of the leases `keys` is live any more, for at most `timeout` seconds;
    returns the keys still live. `progress(stage, live, 0)` hears of each look."""
    pending = set(keys)
    deadline = time.monotonic() + timeout
    pause = POLL
    while pending:
        pending &= set(live(ctx))
        if not pending or time.monotonic() >= deadline:
            break
        if progress is not None:
            progress("waiting for writers that started first", len(pending), 0)
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())) * (0.5 + random.random()))
        pause = min(pause * 2, 1.0)
    return sorted(pending)


class Held:
    """A lease this process holds (a context manager that releases it), and what the leases of
    others said when it was taken."""

    def __init__(self, ctx, record: Lease, others: dict[str, Lease]) -> None:
        self.ctx = ctx
        self.record = record
        self.key = lease_key(record.role, record.id)
        self.others = others
        self._renew_at = ctx.time() + TTL / 3

    @property
    def avoid_packs(self) -> frozenset[str]:
        """Packs a running gc may rewrite or delete: objects in them are not reused."""
        return frozenset(p for k, r in self.others.items() if r is not None and r.role == GC
                         for p in r.packs)

    @property
    def doomed_proposals(self) -> frozenset[str]:
        """Keys of the stale proposals a running gc may delete."""
        return frozenset(p for k, r in self.others.items() if r is not None and r.role == GC
                         for p in r.proposals)

    def renew(self) -> None:
        """Extend the lease if a third of its life has passed (long imports, large seals)."""
        now = self.ctx.time()
        if now < self._renew_at:
            return
        self.record = msgspec.structs.replace(self.record, expires_at=iso(now + TTL))
        # The one record a holder rewrites in place: its key stays the one others wait for.
        self.ctx.backend.replace(self.key, format_record_file(self.record))
        self._renew_at = now + TTL / 3

    def check(self, before: str = "it could claim its record (nothing was recorded)") -> None:
        """Before a claim (or a gc's next deletion): a lease near its end may already look dead
        to others, who would then not keep clear of its holder; give up instead (retryable)."""
        self.renew()
        if self.ctx.time() > seconds_of(self.record.expires_at) - MARGIN:
            raise Aborted(f"the lease of this {self.record.operation} ran out before {before}; "
                          "retry", reason="LEASE_EXPIRED", lease=self.key)

    def release(self) -> None:
        self.ctx.backend.delete(self.key)

    def __enter__(self) -> "Held":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def acquire(ctx, role: str, operation: str, watch: Iterable[str] = ROLES, **fields) -> Held:
    """Publish a lease, then read the others of the roles in `watch` (in that order: see the
    module docstring)."""
    now = ctx.time()
    record = Lease(id=os.urandom(8).hex(), role=role, operation=operation, host=_HOST,
                   pid=os.getpid(), started_at=iso(now), expires_at=iso(now + TTL), **fields)
    key = lease_key(role, record.id)
    try:
        ctx.backend.put_if_absent(key, format_record_file(record))
        others = live(ctx, watch, exclude=key)
    except BaseException:
        try:  # the write may have landed without an answer: do not leave it to expire
            ctx.backend.delete(key)
        except Exception:
            pass
        raise
    return Held(ctx, record, others)


def erasing(ctx, erasure: str, wait: float) -> Held:
    """An erasure's lease, held once no erasure that started before it is at work (it waits
    for those up to `wait` seconds, then ABORTED): two erasures that purge at once could each
    delete a pack the other has written and not yet published, losing what else it holds.
    Which started first is told by (started_at, id) of the two leases, so two that see each
    other agree; one that is not seen by the other saw it, as it published its lease later."""
    deadline = time.monotonic() + wait
    for _ in range(1000):  # in practice once or twice; never for ever
        held = acquire(ctx, ERASURE, "erase", watch=(WRITER, ERASURE), erasure=erasure)
        mine = (held.record.started_at, held.record.id)
        ahead = [k for k in of_role(held.others, ERASURE) if held.others[k] is None or
                 (held.others[k].started_at, held.others[k].id) < mine]
        if not ahead:
            return held
        held.release()  # never hold a lease while waiting: the other may wait for ours
        left = wait_for(ctx, ahead, max(0.0, deadline - time.monotonic()))
        if left:
            raise Aborted(f"another erasure is in progress ({left[0]}); this one changed "
                          "nothing; retry when it completes", reason="ERASURE_IN_PROGRESS",
                          lease=left[0])
    raise Aborted("erasures kept starting while this one waited; it changed nothing; retry",
                  reason="ERASURE_IN_PROGRESS")


def writing(ctx, operation: str) -> Held:
    """A writer's lease. If an erasure is in progress, the writer waits for it to finish
    (up to WRITER_WAIT seconds, then ABORTED): what it writes might name the person."""
    deadline = time.monotonic() + WRITER_WAIT
    for _ in range(1000):  # in practice once or twice; never for ever
        held = acquire(ctx, WRITER, operation, watch=(GC, ERASURE))
        erasing = of_role(held.others, ERASURE)
        if not erasing:
            return held
        held.release()  # never hold a lease while waiting: the erasure may be waiting for it
        left = wait_for(ctx, erasing, max(0.0, deadline - time.monotonic()))
        if left:
            raise Aborted(f"an erasure is in progress ({left[0]}); nothing was written; retry "
                          "when it completes", reason="ERASURE_IN_PROGRESS", lease=left[0])
    raise Aborted("erasures kept starting while this writer waited; nothing was written; retry",
                  reason="ERASURE_IN_PROGRESS")

"""Leases: publish, then read the others; what a live lease is; renewal and its margin; what a
gc's lease tells writers; a writer waiting for an erasure. Over a bare context (a backend and
a clock), as every operation passes it."""

from __future__ import annotations

import os

import pytest

from cas.errors import Aborted
from cas.format.keys import LEASES, lease_key
from cas.format.records import Lease, format_record_file, parse_record_file
from cas.storage import leases
from cas.storage.backends.local import host_name
from cas.storage.backends.memory import MemoryBackend

NOW = 1_800_000_000.0


class Ctx:
    """What the leases use of a repository context: its backend and its clock."""

    def __init__(self, backend=None, now: float = NOW) -> None:
        self.backend = backend or MemoryBackend()
        self.now = now

    def time(self) -> float:
        return self.now


def put_lease(ctx: Ctx, role: str, expires_in: float = leases.TTL, pid: int | None = None,
              host: str = "elsewhere", **fields) -> str:
    """A lease of another holder (another host, unless `host` says otherwise)."""
    record = Lease(id=os.urandom(4).hex(), role=role, operation="test", host=host,
                   pid=os.getpid() if pid is None else pid, started_at=leases.iso(ctx.now),
                   expires_at=leases.iso(ctx.now + expires_in), **fields)
    key = lease_key(role, record.id)
    ctx.backend.put_if_absent(key, format_record_file(record))
    return key


def test_times_are_written_to_the_microsecond_and_read_back():
    assert leases.iso(NOW + 0.25) == "2027-01-15T08:00:00.250000Z"
    assert leases.seconds_of(leases.iso(NOW + 0.25)) == NOW + 0.25
    assert leases.seconds_of("not a time") == 0.0  # unreadable: long expired


def test_of_role_tells_the_role_by_the_key():
    keys = [lease_key("writer", "a"), lease_key("gc", "b"), lease_key("writer", "c")]
    assert leases.of_role(keys, leases.WRITER) == [keys[0], keys[2]]
    assert leases.of_role(keys, leases.ERASURE) == []


def test_acquire_publishes_then_sees_the_others_and_release_deletes():
    ctx = Ctx()
    gc = put_lease(ctx, leases.GC, packs=["p1"])
    with leases.acquire(ctx, leases.WRITER, "commit") as held:
        assert held.ctx is ctx and held.key.startswith(f"{LEASES}writer.")
        assert sorted(ctx.backend.list(LEASES)) == sorted([gc, held.key])
        assert list(held.others) == [gc] and held.record.operation == "commit"
        later = leases.acquire(ctx, leases.GC, "gc")
        assert held.key in later.others  # of any two, the later one sees the earlier
        later.release()
    assert list(ctx.backend.list(LEASES)) == [gc]


def test_live_leases_are_unexpired_of_the_roles_asked_and_not_excluded():
    ctx = Ctx()
    writer = put_lease(ctx, leases.WRITER)
    gc = put_lease(ctx, leases.GC)
    put_lease(ctx, leases.WRITER, expires_in=-1)  # expired: dead
    assert sorted(leases.live(ctx)) == sorted([writer, gc])
    assert list(leases.live(ctx, (leases.GC,))) == [gc]
    assert list(leases.live(ctx, exclude=writer)) == [gc]


def test_a_lease_of_a_process_of_this_host_that_is_gone_is_dead_at_once():
    ctx = Ctx()
    mine = put_lease(ctx, leases.WRITER, host=host_name())  # this process: alive
    gone = put_lease(ctx, leases.WRITER, host=host_name(), pid=2**22 + 12345)  # past pid_max
    assert list(leases.live(ctx)) == [mine] and gone not in leases.live(ctx)


def test_a_damaged_lease_is_honoured_while_its_file_is_young():
    backend = MemoryBackend()
    backend.put_if_absent(lease_key(leases.GC, "bad"), b"not a record")
    written = backend.modified(lease_key(leases.GC, "bad"))
    assert leases.live(Ctx(backend, written + 1)) == {lease_key(leases.GC, "bad"): None}
    assert leases.live(Ctx(backend, written + leases.TTL + 1)) == {}


def test_what_a_gcs_lease_tells_a_writer():
    ctx = Ctx()
    put_lease(ctx, leases.GC, packs=["p1", "p2"], proposals=["datasets/d/proposals/x"])
    put_lease(ctx, leases.WRITER, packs=["ignored"])
    with leases.acquire(ctx, leases.WRITER, "commit") as held:
        assert held.avoid_packs == {"p1", "p2"}
        assert held.doomed_proposals == {"datasets/d/proposals/x"}


def test_a_lease_is_renewed_after_a_third_of_its_life_and_refused_near_its_end():
    ctx = Ctx()
    held = leases.acquire(ctx, leases.WRITER, "import")
    first = ctx.backend.get(held.key)
    ctx.now += leases.TTL / 3 - 1
    held.renew()
    assert ctx.backend.get(held.key) == first  # too early: no write
    ctx.now += 2
    held.check()  # renews, so the claim goes ahead
    renewed = parse_record_file(ctx.backend.get(held.key), Lease, held.key)
    assert renewed.expires_at == leases.iso(ctx.now + leases.TTL) and renewed.id == held.record.id

    class Stalling(MemoryBackend):
        def replace(self, key, data):  # the holder stalls right after renewing
            super().replace(key, data)
            ctx.now += leases.TTL - leases.MARGIN + 1
    ctx.backend = Stalling()
    ctx.now += leases.TTL / 3
    with pytest.raises(Aborted) as info:
        held.check("it could claim its record")
    assert info.value.reason == "LEASE_EXPIRED" and info.value.fields["lease"] == held.key
    assert "ran out before it could claim its record" in info.value.message


def test_wait_for_returns_the_leases_still_live_at_the_deadline():
    ctx = Ctx()
    stuck = put_lease(ctx, leases.WRITER)
    heard = []
    assert leases.wait_for(ctx, [stuck], 0.0) == [stuck]
    assert leases.wait_for(ctx, [stuck], 0.12, lambda *a: heard.append(a)) == [stuck]
    assert heard and heard[0] == ("waiting for writers that started first", 1, 0)
    ctx.backend.delete(stuck)
    assert leases.wait_for(ctx, [stuck], 10.0) == []


def test_a_writer_waits_for_an_erasure_then_gives_up(monkeypatch):
    ctx = Ctx()
    put_lease(ctx, leases.GC)  # a gc does not stop a writer
    with leases.writing(ctx, "commit") as held:
        assert held.record.role == leases.WRITER
    erasing = put_lease(ctx, leases.ERASURE, erasure="e1")
    monkeypatch.setattr(leases, "WRITER_WAIT", 0.1)
    with pytest.raises(Aborted) as info:
        leases.writing(ctx, "commit")
    assert info.value.reason == "ERASURE_IN_PROGRESS" and info.value.fields["lease"] == erasing
    assert leases.of_role(ctx.backend.list(LEASES), leases.WRITER) == []  # released to wait


def test_documented_operations_are_the_codes_and_every_caller_names_one():
    """docs/format.md 4.9 lists each role's operations exactly: the list fsck checks
    (leases.OPERATIONS), and every operation a caller of the leases writes is in it."""
    import re
    from pathlib import Path
    root = Path(__file__).parents[2]
    doc = (root / "docs" / "format.md").read_text("utf-8")
    section = doc[doc.index("### 4.9 "):doc.index("### 4.10 ")]
    table = section[section.index("**Operations, exactly.**"):]
    documented = set(re.findall(r"^\| `([a-z]+)` \| `([^`]+)` \|", table, re.MULTILINE))
    documented.discard(("role", "operation"))  # the table's head
    assert documented == {(role, op) for role, ops in leases.OPERATIONS.items() for op in ops}
    used = set()
    for path in (root / "cas").rglob("*.py"):
        text = path.read_text("utf-8")
        used |= {(leases.WRITER, op) for op in re.findall(r'leases\.writing\(ctx, "([^"]+)"',
                                                          text)}
        used |= {(getattr(leases, role), op) for role, op in re.findall(
            r'leases\.acquire\([\w.]+, leases\.(WRITER|GC|ERASURE), "([^"]+)"', text)}
        used |= {(leases.WRITER, op) for op in re.findall(r'_stage\(ctx, name, "([^"]+)"',
                                                          text)}
        if re.search(r"leases\.erasing\(", text):  # (its lease's operation is always this)
            used.add((leases.ERASURE, "erase"))
    used.add((leases.GC, leases.MERGE))
    assert used == documented

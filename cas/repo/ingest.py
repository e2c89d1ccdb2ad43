"""Staging the cases of a commit, and of a large JSON Lines file with two processes.

A commit's cases are encoded, hashed and packed in one interpreter, so a large ingest is
bound by one core. Given the cases of a large regular file (`read_cases_jsonl` on a file
opened 'rb'), a commit splits the file at a line boundary near its middle: a second process
stores the cases of the second half in packs of its own while this one stores the first
half in packs of its own too; each sorts its ids while its last pack is written, and this
one then adopts the other's packs (they are published, their ids merged into the version,
one multi-pack index covers both halves). The version is the same as with one process: its
tree is a function of the set of case ids alone.

The helper works under the commit's writer lease (it holds none of its own and never
maintains packs), sees the same erased persons and the same packs to avoid, and stops at
its first bad line; the commit then re-reads that one line itself, numbered as in the whole
file, so the refusal is the one a single process gives. Only a repository a second process
can open (a local directory, an s3:// URL) is split; `CAS_INGEST_PROCESSES=1` turns it off.
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any, Iterable

import msgspec

from cas.errors import CasError
from cas.format.cases import JsonlCases, encode_case
from cas.repo.erased import Erased, refuse_erased
from cas.storage.store import PackWriter

SPLIT_MIN_BYTES = 64 << 20  # a smaller file is read in line: a second process costs ~0.2 s
_FIND_NEWLINE = 1 << 20     # a split point is the end of the line at the middle, if this near
# This process takes this much more than half: the helper starts its half later, once it has
# started an interpreter and imported cas (about 0.1 s: the bytes this process stages
# meanwhile, about 6 MB, are split between the two).
HEAD_START = 3 << 20


def stage_cases(store, writer, add: Iterable[Any], erased: dict[str, Erased],
                ids: set[bytes]) -> None:
    """Encode every case of `add` and add it to `writer`, its raw digest to `ids`. A case
    naming an erased person (`erased`: keyed digest -> Erased) is refused before it is
    staged: its bytes never reach a pack."""
    add_encoded = writer.add_encoded
    for item in add:
        enc = encode_case(item)
        if erased and enc.person is not None:
            refuse_erased(erased, store.person_digest(enc.person), enc.person,
                          f"case {enc.case_id}", case_id=enc.case_id)
        ids.add(add_encoded("case", enc.data, enc.case_id, enc.person))


class Split(msgspec.Struct, frozen=True):
    """What the second process is told: where the repository and the file's second half are,
    and what the commit's writer knows (the person key, the erased persons, the packs a gc
    may be deleting, the pack size)."""

    location: str
    path: str
    start: int            # byte offset of the second half (a line starts there)
    source: str
    person_key: bytes | None
    erased: dict[str, Erased]  # keyed digest -> the erasure of that person
    avoid_packs: list[str]
    max_bytes: int
    parent: int           # the committing process: the helper must not outlive it


class Staged(msgspec.Struct, frozen=True):
    """What the second process answers: the raw digests of its cases (sorted, joined), the
    indexes of the packs it wrote and what they hold, or where it stopped if it failed."""

    ids: bytes = b""
    indexes: list[bytes] = []
    objects: int = 0
    bytes_written: int = 0
    bad_offset: int | None = None   # the first refused line's byte offset in the file
    bad_line: int | None = None     # and its number within the second half
    error: dict[str, Any] | None = None  # a failure that is no line's (storage)


def split_point(add: Any, backend) -> tuple[str, str, int] | None:
    """(repository location, path, offset of the second half) if `add` is worth storing with
    two processes: the cases of a regular file opened 'rb' with at least SPLIT_MIN_BYTES
    left to read, on a repository another process can open; else None."""
    if not isinstance(add, JsonlCases) or os.environ.get("CAS_INGEST_PROCESSES") == "1":
        return None
    cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else
             os.cpu_count() or 1)
    if cores < 2:
        return None
    stream, location = add.stream, reopenable(backend)
    if location is None or not isinstance(stream, (io.BufferedReader, io.FileIO)) or \
            not isinstance(getattr(stream, "name", None), str) or "b" not in stream.mode:
        return None
    try:
        st = os.fstat(stream.fileno())
        named = os.stat(stream.name)
        here = stream.tell()
    except (OSError, ValueError):
        return None
    if (st.st_dev, st.st_ino) != (named.st_dev, named.st_ino) or not os.path.isfile(stream.name):
        return None
    left = st.st_size - here
    if left < SPLIT_MIN_BYTES:
        return None
    middle = here + left // 2 + min(HEAD_START, left // 8)
    tail = os.pread(stream.fileno(), _FIND_NEWLINE, middle - 1)
    newline = tail.find(b"\n")
    if newline < 0 or middle + newline >= st.st_size:
        return None  # one huge line, or none after the middle: not worth splitting
    return location, os.path.abspath(stream.name), middle + newline


def reopenable(backend) -> str | None:
    """The location another process opens this backend by (a local directory, or the s3://
    URL a caching backend fronts), or None (a memory backend, a test's wrapper)."""
    from cas.storage.backends.cache import CachingBackend
    from cas.storage.backends.local import LocalBackend
    return backend.url if type(backend) in (LocalBackend, CachingBackend) else None


def stage_split(ctx, writer, add: JsonlCases, point: tuple[str, str, int],
                erased: dict[str, Erased]) -> list[bytes]:
    """Stage the cases of `add` (a file split at `point`) with a second process for the
    second half; the raw digests of all its cases, sorted and unique. Raises the first bad
    line's refusal, numbered as in the whole file. If the helper ends without answering,
    this process stores the second half too."""
    import tempfile  # (not at import: a command that stores no large file never needs it)
    location, path, start = point
    split = Split(location=location, path=path, start=start, source=add.source,
                  person_key=ctx.store.person_key,
                  erased=erased,
                  avoid_packs=sorted(writer.avoid_packs), max_bytes=writer.max_bytes,
                  parent=os.getpid())
    here = add.stream.tell()
    first = JsonlCases(_lines_before(add.stream, start - here), add.source, add.first_line)
    # The first half goes to packs of its own, written before the helper is waited for (it
    # started later, so it ends later): only the tree and its small pack remain after both.
    # (Staged into `writer` itself, the half's last pack, up to 64 MB to hash, index, write
    # and sync, was written after the helper had ended, in series with it.)
    half = PackWriter(ctx.store, writer.max_bytes, lease=writer.lease,
                      avoid_packs=writer.avoid_packs)
    ids: set[bytes] = set()
    with tempfile.TemporaryFile() as stderr:
        helper = _start(split, stderr)
        try:
            try:
                stage_cases(ctx.store, half, first, erased, ids)
                mine, packs = _sorted_while_written(ids, half)
            finally:
                half.close()
            out, _ = helper.communicate()
        except BaseException:
            helper.kill()
            helper.wait()
            raise
        staged = _answer(helper, out, stderr)
        del out
    writer.adopt(packs, half.objects_written, half.bytes_written)
    if staged is None:  # it ended without answering: this process reads the rest itself
        stage_cases(ctx.store, writer, JsonlCases(add.stream, add.source, first.line + 1),
                    erased, ids)
        return sorted(ids)
    if staged.bad_offset is not None:
        _refuse_line(ctx, writer, add, path, staged, first.line, erased)
    if staged.error is not None:
        raise _error_of(staged.error)
    writer.adopt(staged.indexes, staged.objects, staged.bytes_written)
    add.stream.seek(0, os.SEEK_END)  # read to its end, as by one process
    raw = staged.ids
    theirs = [raw[i:i + 32] for i in range(0, len(raw), 32)]
    del raw, staged  # (16 MB a million ids)
    if not ids.isdisjoint(theirs):  # a case in both halves (rare): sorted again, once each
        ids.update(theirs)
        return sorted(ids)
    # Two sorted runs: the sort merges them in one pass (sorting a million ids whole cost
    # about a second after both halves, on the ingest's critical path).
    mine += theirs
    mine.sort()
    return mine


def _sorted_while_written(ids: set[bytes], writer: PackWriter) -> tuple[list[bytes],
                                                                        list[bytes]]:
    """`ids` sorted, while a thread writes the writer's last pack (its writing and syncing
    hold no interpreter lock); and the indexes of the packs the writer wrote."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1, thread_name_prefix="cas-pack") as pool:
        written = pool.submit(writer.write_packs)
        ordered = sorted(ids)
        return ordered, written.result()


def _lines_before(stream, size: int):
    """The lines of `stream` in its next `size` bytes (which end at a line's end)."""
    left = size
    for line in stream:
        yield line
        left -= len(line)
        if left <= 0:
            return


def _start(split: Split, stderr):
    import subprocess
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    helper = subprocess.Popen([sys.executable, "-m", "cas.repo.ingest"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=stderr, env=env)
    try:
        helper.stdin.write(msgspec.msgpack.encode(split))
        helper.stdin.close()
    except BrokenPipeError:
        pass  # it ended at once: its status and message say why (_answer)
    helper.stdin = None  # (communicate would flush it)
    return helper


def _answer(helper, out: bytes, stderr) -> Staged | None:
    """The helper's answer, or None (with a warning naming its status and message) if it
    ended without one: killed, out of memory, or unable to start."""
    try:
        if helper.returncode == 0:
            return msgspec.msgpack.decode(out, type=Staged)
    except msgspec.DecodeError:
        pass
    import warnings
    stderr.seek(0)
    tail = stderr.read()[-2000:].decode("utf-8", "replace").strip()
    warnings.warn(f"cas: the process storing the second half of the input ended with status "
                  f"{helper.returncode} ({tail or 'no message'}); this process stores it "
                  "instead (CAS_INGEST_PROCESSES=1 uses one process from the start)",
                  RuntimeWarning, stacklevel=2)
    return None


def _refuse_line(ctx, writer, add: JsonlCases, path: str, staged: Staged, lines_before: int,
                 erased: dict[str, Erased]) -> None:
    """Raise the refusal of the line the second process stopped at: read again here and
    numbered as in the whole input, it is the refusal one process would have raised."""
    with open(path, "rb") as f:
        f.seek(staged.bad_offset)
        line = f.readline()
    number = lines_before + staged.bad_line
    stage_cases(ctx.store, writer, JsonlCases([line], add.source, number), erased, set())
    raise CasError(f"{add.source} line {number} was refused by the process reading it "
                          "but not when read again", line=number)


def _error_of(fields: dict[str, Any]) -> CasError:
    """The typed error the second process raised (by its code)."""
    fields = dict(fields)
    code, reason, message = fields.pop("code"), fields.pop("reason"), fields.pop("message")
    kind = next((c for c in CasError.__subclasses__() if c.code == code), CasError)
    return kind(message, reason=reason, **fields)


def _die_with(parent: int) -> None:
    """End this helper when the commit's process ends: its writes are covered by the commit's
    lease alone, and once that holder is gone an erasure may start, which must not be followed
    by a pack naming the person. On Linux the kernel kills it (PR_SET_PDEATHSIG); elsewhere,
    and for a commit that ended before this ran, `_while_alive` and this check see it."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)


def _while_alive(cases: Iterable[Any], parent: int) -> Iterable[Any]:
    """`cases`, stopping the process (no answer, nothing more written) once the commit's
    process is gone (checked every 4096 cases: a pack's worth is about 40,000)."""
    for n, case in enumerate(cases):
        if not n & 4095 and os.getppid() != parent:
            os._exit(1)
        yield case


def _serve() -> int:
    """The second process: store the cases of the file from `start` on, answer on stdout."""
    import gc

    from cas.storage.backends import backend_for
    from cas.storage.store import ObjectStore
    split = msgspec.msgpack.decode(sys.stdin.buffer.read(), type=Split)
    _die_with(split.parent)
    gc.disable()  # as the commit's own loop: millions of small objects, no cycles
    backend = backend_for(split.location)
    store = ObjectStore(backend, getattr(backend, "cache_dir", None), split.person_key)
    writer = PackWriter(store, split.max_bytes, avoid_packs=frozenset(split.avoid_packs))
    ids: set[bytes] = set()
    with open(split.path, "rb") as f:
        f.seek(split.start)
        cases = JsonlCases(f, split.source)
        try:
            stage_cases(store, writer, _while_alive(cases, split.parent), split.erased, ids)
            ordered, indexes = _sorted_while_written(ids, writer)
            answer = Staged(ids=b"".join(ordered), indexes=indexes,
                            objects=writer.objects_written, bytes_written=writer.bytes_written)
        except CasError as exc:
            # A line refused (the codec names its line; an erased person is the line's), or
            # a failure of the storage.
            if "line" in exc.fields or exc.reason == "PERSON_ERASED_BEFORE":
                answer = Staged(bad_offset=split.start + cases.offset, bad_line=cases.line)
            else:
                answer = Staged(error=exc.to_json())
        finally:
            writer.close()
    sys.stdout.buffer.write(msgspec.msgpack.encode(answer))
    return 0


if __name__ == "__main__":
    sys.exit(_serve())

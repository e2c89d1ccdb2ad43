"""Local directory backend: the embedded default. Atomic, durable create-if-absent via link(2)."""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import Iterator

from cas.errors import InvalidArgument, NotFound, PermissionDenied, Unavailable
from cas.storage.backends import HeldFile, check_key

# Staging directory for writes in flight. '~' is outside the key alphabet, so no key can name
# it: a key such as ".tmp/x" must not land among (and be hidden with) the staging files.
_TMP = "~tmp"


def host_name() -> str:
    """This machine's name, as `socket.gethostname()` gives it (the name uname reports),
    without importing socket at start-up."""
    try:
        return os.uname().nodename
    except AttributeError:  # no uname (Windows)
        import socket
        return socket.gethostname()


def _host() -> str:
    """This host as staging names spell it: its name (without '-', so a name splits cleanly)
    and, on Linux, its pid namespace, so a pid is only ever judged where it means something."""
    name = re.sub(r"[^A-Za-z0-9.]", "_", host_name())[:64] or "localhost"
    try:
        name += f".pidns{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        pass
    return name


_HOST = _host()


def staging_name() -> str:
    """`<host>-<pid>-<random>`: a staging file names its writer, so a sweep can tell the
    leftovers of a process that died from a write in flight."""
    return f"{_HOST}-{os.getpid()}-{os.urandom(12).hex()}"


# What the file system says when it refuses this process (modes, ownership, a read-only mount):
# PERMISSION_DENIED, like a 403 from S3; retrying cannot help.
_REFUSED = (errno.EACCES, errno.EPERM, errno.EROFS)


def _denied(action: str, key: str, root: str, exc: OSError) -> PermissionDenied:
    where = f" ({exc.filename})" if exc.filename else ""
    return PermissionDenied(f"permission denied: cannot {action} {key!r} in {root}: "
                            f"{exc.strerror}{where}", key=key, location=root,
                            path=exc.filename)


def _dead_writer(name: str) -> bool:
    """Whether a staging file was written by a process of this host that is no longer alive
    (a name of another host, or of no known form, is judged by its age alone)."""
    parts = name.rsplit("-", 2)
    if os.name != "posix" or len(parts) != 3 or parts[0] != _HOST or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False  # it exists (another user's), or the pid is not one
    return False


class LocalBackend:
    CONCURRENT_CALLS = True  # safe to call from several threads (get_ranges)
    LISTING_MAY_LAG = False  # a file is listed once its rename has published it

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.url = self.root

    def _path(self, key: str) -> str:
        return os.path.join(self.root, *check_key(key).split("/"))

    def get(self, key: str) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise NotFound(f"no such key {key!r}", key=key) from None
        except PermissionError as exc:
            raise _denied("read", key, self.root, exc) from None

    def _open_file(self, key: str) -> tuple[int, os.stat_result]:
        """An open descriptor of the regular file of `key` and its stat (the caller closes it);
        NotFound if there is none (a directory holding longer keys is not a key)."""
        try:
            fd = os.open(self._path(key), os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(f"no such key {key!r}", key=key) from None
        except PermissionError as exc:
            raise _denied("read", key, self.root, exc) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise NotFound(f"no such key {key!r}", key=key)
        return fd, st

    def get_range(self, key: str, offset: int, length: int) -> bytes:
        fd, st = self._open_file(key)
        try:
            # Clamp to the file: an offset or length read from a damaged index may be huge
            # (pread would overflow, or allocate gigabytes) and must just read past the end.
            if offset >= st.st_size:
                return b""
            return os.pread(fd, min(length, st.st_size - offset), offset)
        finally:
            os.close(fd)

    def get_ranges(self, key: str, spans: list[tuple[int, int]]) -> list[bytes]:
        """`get_range` of each (offset, length), the file opened once for all of them."""
        fd, st = self._open_file(key)
        try:
            return [b"" if offset >= st.st_size else
                    os.pread(fd, min(length, st.st_size - offset), offset)
                    for offset, length in spans]
        finally:
            os.close(fd)

    def map(self, key: str):
        """The file of `key` held open (a `HeldFile`: slices of it are bytes), for files that
        never change once written and hold no one's data (pack indexes): a reader's probes
        then cost no backend call each (no open, no stat). It stays readable after the key
        is deleted."""
        fd, st = self._open_file(key)
        if not st.st_size:
            os.close(fd)
            return b""
        return HeldFile(fd, st.st_size)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        return self._write(key, data, replace=False)

    def replace(self, key: str, data: bytes) -> None:
        self._write(key, data, replace=True)

    def _write(self, key: str, data: bytes, replace: bool) -> bool:
        path = self._path(key)
        if not replace and os.path.exists(path):
            return False
        tmp_dir = os.path.join(self.root, _TMP)
        tmp = os.path.join(tmp_dir, staging_name())
        try:
            self._makedirs(tmp_dir)
            self._makedirs(os.path.dirname(path))
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            # link(2) publishes the complete file under its name and fails if the name exists:
            # an atomic create-if-absent that never replaces what another writer published.
            # rename(2) is the atomic replace that erasure alone uses.
            try:
                if replace:
                    os.rename(tmp, path)
                else:
                    os.link(tmp, path)
            except FileExistsError:
                return False
            fsync_dir(os.path.dirname(path))
            return True
        except OSError as exc:
            if exc.errno in _REFUSED:
                raise _denied("write", key, self.root, exc) from None
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise Unavailable(f"cannot write {key!r} in {self.root}: {exc.strerror}",
                                  key=key, location=self.root) from None
            raise
        finally:
            try:
                os.unlink(tmp)
            except (FileNotFoundError, PermissionError):
                pass  # never created (or, refused, never removable either)

    def delete(self, key: str) -> bool:
        path = self._path(key)
        try:
            os.unlink(path)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return False  # absent: a directory (or a path through a file) is not a key
        except PermissionError as exc:
            raise _denied("delete", key, self.root, exc) from None
        fsync_dir(os.path.dirname(path))
        return True

    def list(self, prefix: str = "") -> Iterator[str]:
        # Walk only the directory that can hold the prefix, then filter by the full prefix.
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        if head:
            # Every key starting with `prefix` starts with the whole segments `head`, so an
            # invalid head matches no key; and walking it ("..") could leave the root.
            try:
                check_key(head)
            except InvalidArgument:
                return iter([])
        keys: list[str] = []
        # (scandir by hand: os.walk's relpath per directory cost more than the names)
        stack = [(os.path.join(self.root, *head.split("/")), head + "/")] if head else \
            [(self.root, "")]
        while stack:
            path, base = stack.pop()
            try:
                entries = list(os.scandir(path))
            except (FileNotFoundError, NotADirectoryError):
                continue  # (gone, or not a directory: no keys, as os.walk would say)
            except PermissionError as exc:
                # a directory this process may not read holds keys all the same: a listing
                # that left them out would pass them off as absent
                raise _denied("list", prefix, self.root, exc) from None
            for entry in entries:
                if entry.is_dir():  # (a link to a directory is neither walked nor a key)
                    if not entry.is_symlink() and (base or entry.name != _TMP):
                        stack.append((entry.path, f"{base}{entry.name}/"))
                elif (key := base + entry.name).startswith(prefix):
                    keys.append(key)
        keys.sort()
        return iter(keys)

    def exists(self, key: str) -> bool:
        return os.path.isfile(self._path(key))

    def sweep_staging(self, older_than: float) -> int:
        """Delete the staging files no write in flight will publish: those of a process of
        this host that is no longer alive, and any last written before `older_than` (epoch
        seconds; a writer on another host cannot be asked). Left by a process killed
        mid-write, they may hold bytes an erasure must not leave behind."""
        tmp_dir = os.path.join(self.root, _TMP)
        removed = 0
        for name in os.listdir(tmp_dir) if os.path.isdir(tmp_dir) else ():
            path = os.path.join(tmp_dir, name)
            try:
                if _dead_writer(name) or os.stat(path).st_mtime < older_than:
                    os.unlink(path)
                    removed += 1
            except FileNotFoundError:
                continue  # its write finished meanwhile
        return removed

    def modified(self, key: str) -> float:
        try:
            st = os.stat(self._path(key))
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(f"no such key {key!r}", key=key) from None
        except PermissionError as exc:
            raise _denied("read", key, self.root, exc) from None
        if not stat.S_ISREG(st.st_mode):
            raise NotFound(f"no such key {key!r}", key=key)
        return st.st_mtime

    def _makedirs(self, path: str) -> None:
        if os.path.isdir(path):
            return
        parent = os.path.dirname(path)
        self._makedirs(parent)
        try:
            os.mkdir(path)
        except FileExistsError:
            return
        fsync_dir(parent)


def fsync_dir(path: str) -> None:
    """Make a rename or link in directory `path` durable (the entry is in the directory)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

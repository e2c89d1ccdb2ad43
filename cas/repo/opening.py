"""Creating, opening and finding a repository at a location: a directory or an s3:// URL."""

from __future__ import annotations

import builtins
import errno
import os

from cas.errors import AlreadyExists, InvalidArgument, NotFound, PermissionDenied, Unavailable
from cas.format.keys import CONFIG
from cas.repo import checks
from cas.repo.repository import Repository
from cas.storage.backends import is_remote, remote_backend
from cas.storage.backends.local import LocalBackend

REPO_DIR = ".cas"


def _local_root(path: str) -> str:
    path = os.path.abspath(path)
    return path if os.path.basename(path) == REPO_DIR else os.path.join(path, REPO_DIR)


def init(path: str = ".") -> Repository:
    """Create a repository in `path/.cas` (or at an `s3://BUCKET/PREFIX` URL); an existing one
    is refused."""
    path = checks.path(path, "path")
    if is_remote(path):
        return Repository.create(remote_backend(path))
    root = _local_root(path)
    if os.path.exists(root):
        raise AlreadyExists(f"a repository already exists at {root}", location=root)
    try:
        os.makedirs(root)
    except OSError as exc:  # a file on the way, a name too long: the path; else the storage
        bad_path = isinstance(exc, (NotADirectoryError, FileExistsError)) or \
            exc.errno == errno.ENAMETOOLONG
        refused = exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
        raise (InvalidArgument if bad_path else PermissionDenied if refused else Unavailable)(
            f"cannot create a repository at {root}: {exc.strerror}", location=root) from None
    try:
        return Repository.create(LocalBackend(root))
    except AlreadyExists:
        raise AlreadyExists(f"a repository already exists at {root}", location=root) from None


def open(path: str = ".") -> Repository:  # noqa: A001 - the API name is cas.open
    """Open the repository at `path/.cas` (or `path` itself if it is the .cas directory, or an
    `s3://BUCKET/PREFIX` URL). Opening reads; it never writes."""
    path = checks.path(path, "path")
    if is_remote(path):
        backend = remote_backend(path)
        if not backend.exists(CONFIG):
            raise NotFound(f"no cas repository at {path} (run `cas init {path}` to create one)",
                           location=path)
        return Repository(backend)
    root = _local_root(path)
    if not _holds_config(root):
        raise NotFound(f"no cas repository at {root} (run `cas init` to create one)", location=root)
    return Repository(LocalBackend(root))


def _holds_config(root: str) -> bool:
    """Whether `root` holds a repository's config file. A directory this process may not read
    is PERMISSION_DENIED, not "no repository" (which would send the user to `cas init`)."""
    config = os.path.join(root, CONFIG)
    try:
        with builtins.open(config, "rb"):
            return True
    except PermissionError as exc:
        raise PermissionDenied(f"permission denied: cannot open the repository at {root}: "
                               f"{exc.strerror} ({exc.filename})", operation="open",
                               location=root, path=exc.filename) from None
    except (OSError, ValueError):  # absent, not a directory, a name too long, a NUL byte
        return False


def find(start: str = ".") -> str:
    """The nearest directory at or above `start` holding a `.cas` repository."""
    start = checks.path(start, "start")
    here = os.path.abspath(start)
    while True:
        if _holds_config(os.path.join(here, REPO_DIR)):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            raise NotFound(f"no cas repository in {os.path.abspath(start)} or any parent "
                           "(run `cas init`, or pass --repo / set CAS_REPO)")
        here = parent

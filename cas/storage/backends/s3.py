"""S3-compatible backend: the same flat key space in a bucket, atomic via `If-None-Match: *`."""

from __future__ import annotations

import configparser
import os
import random
import re
import threading
import time
from collections import Counter
from typing import Iterator
from urllib.parse import urlparse

from cas.errors import (CasError, FailedPrecondition, InvalidArgument, NotFound, PermissionDenied,
                        Unavailable)
from cas.storage.backends import check_key

ATTEMPTS = 6          # for a conditional put we retry ourselves (see put_if_absent)
BACKOFF_S = 0.05
READ_RETRIES = 5      # every other request is retried by the client, with backoff from
READ_BACKOFF_S = 0.05  # READ_BACKOFF_S doubling up to 2 s, for at most 60 s
# No object is this large; ranges ending past 2**64 are refused by the client itself.
MAX_OFFSET = 1 << 63


def parse_url(url: str) -> tuple[str, str]:
    """`s3://BUCKET[/PREFIX]` -> (bucket, prefix without slashes)."""
    parsed = urlparse(url)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise InvalidArgument(f"{url!r} is not an S3 location; expected s3://BUCKET/PREFIX",
                              location=url)
    prefix = parsed.path.strip("/")
    if prefix:
        check_key(prefix)
    return parsed.netloc, prefix


def aws_settings(environ=os.environ) -> dict[str, str]:
    """Endpoint, region and credentials as the AWS tools find them: environment variables
    first, then the shared config and credentials files for AWS_PROFILE (default `default`)."""
    profile = environ.get("AWS_PROFILE") or environ.get("AWS_DEFAULT_PROFILE") or "default"
    home = os.path.expanduser("~")
    config_file = environ.get("AWS_CONFIG_FILE") or os.path.join(home, ".aws", "config")
    cred_file = (environ.get("AWS_SHARED_CREDENTIALS_FILE")
                 or os.path.join(home, ".aws", "credentials"))
    from_files: dict[str, str] = {}
    for path, section in ((config_file, profile if profile == "default" else f"profile {profile}"),
                          (cred_file, profile)):
        parser = configparser.RawConfigParser()
        try:
            parser.read(path)
        except configparser.Error as exc:
            raise InvalidArgument(f"cannot read AWS settings file {path}: {exc}") from None
        if parser.has_section(section):
            from_files.update(parser.items(section))

    def pick(env_names, file_name):
        for name in env_names:
            if environ.get(name):
                return environ[name]
        return from_files.get(file_name)

    out = {
        "endpoint": pick(["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"], "endpoint_url"),
        "region": pick(["AWS_REGION", "AWS_DEFAULT_REGION"], "region"),
        "access_key_id": pick(["AWS_ACCESS_KEY_ID"], "aws_access_key_id"),
        "secret_access_key": pick(["AWS_SECRET_ACCESS_KEY"], "aws_secret_access_key"),
        "token": pick(["AWS_SESSION_TOKEN"], "aws_session_token"),
    }
    return {k: v for k, v in out.items() if v}


class S3Backend:
    """Keys live under `s3://bucket/prefix/`. Counts requests by kind in `self.requests`."""
    CONCURRENT_CALLS = True  # safe to call from several threads (get_ranges)
    ROUND_TRIPS = True  # each read waits for a round trip: writers spool a large batch (store.py)

    def __init__(self, url: str, environ=os.environ) -> None:
        try:
            from obstore.store import S3Store
        except ImportError:
            raise FailedPrecondition(
                "S3 repositories need the S3 client, from the `s3` extra: pip install '.[s3]' "
                "in the cas checkout",
                reason="MISSING_DEPENDENCY") from None
        self.url = url.rstrip("/")
        self.bucket, self.prefix = parse_url(url)
        settings = aws_settings(environ)
        config = {"region": settings.get("region", "us-east-1")}
        # Named in every UNAVAILABLE error: "cannot reach storage" must say which storage.
        self.endpoint = settings.get("endpoint") or f"https://s3.{config['region']}.amazonaws.com"
        for name in ("endpoint", "access_key_id", "secret_access_key", "token"):
            if name in settings:
                config[name] = settings[name]
        client = {"timeout": "30s", "connect_timeout": "5s"}
        if settings.get("endpoint"):
            config["virtual_hosted_style_request"] = False  # MinIO, SeaweedFS, Ceph: path style
            if settings["endpoint"].startswith("http://"):
                client["allow_http"] = True
        kwargs = dict(prefix=self.prefix or None, client_options=client, **config)
        retry = {"max_retries": READ_RETRIES, "retry_timeout": _seconds(60),
                 "backoff": {"init_backoff": _seconds(READ_BACKOFF_S),
                             "max_backoff": _seconds(2), "base": 2}}
        self._store = S3Store(self.bucket, retry_config=retry, **kwargs)
        # Conditional puts are retried by us, not by the client, so that a 412 after a lost
        # response can be told apart from a 412 because another writer won.
        self._create_store = S3Store(self.bucket, retry_config={"max_retries": 0}, **kwargs)
        self.requests: Counter[str] = Counter()
        self.bytes_read = 0  # the body bytes of every GET (what a benchmark reports)
        self.trace: list[tuple[str, str]] | None = None  # a list: (kind, key) of each request
        self._lock = threading.Lock()

    def _unavailable(self, action: str, key: str, exc: Exception | None,
                     what: str = "") -> Unavailable:
        """UNAVAILABLE naming the repository URL (bucket and prefix), the endpoint and the key."""
        cause = _first_line(exc) if exc is not None else ""
        detail = f"{what}: {cause}" if what and cause else what or cause or "storage failed"
        return Unavailable(f"cannot {action} {key!r} in {self.url} at {self.endpoint}: {detail}",
                           key=key, location=self.url, endpoint=self.endpoint)

    def _failed(self, action: str, key: str, exc: Exception, what: str = "") -> CasError:
        """PERMISSION_DENIED when the store refused the request (decided on the client's error
        type), else UNAVAILABLE; both name the key, the repository URL and the endpoint."""
        if not _refused(exc):
            return self._unavailable(action, key, exc, what)
        from obstore.exceptions import UnauthenticatedError
        status = 401 if isinstance(exc, UnauthenticatedError) else 403
        # The S3 error code and message, when the answer carried them, only to tell the
        # person which refusal it was (SignatureDoesNotMatch, InvalidAccessKeyId, AccessDenied).
        text = str(exc)
        code = re.search(r"<Code>([^<]{1,64})</Code>", text)
        said = re.search(r"<Message>([^<]{1,200})</Message>", text)
        detail = " ".join(filter(None, (code and code.group(1), said and f"({said.group(1)})")))
        return PermissionDenied(
            f"storage refused to {action} {key!r} in {self.url} at {self.endpoint}: HTTP "
            f"{status}{' ' + detail if detail else ''}; check the credentials "
            "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE) and what they may do in "
            "this bucket", key=key, location=self.url, endpoint=self.endpoint, status=status,
            s3_code=code.group(1) if code else None)

    def _count(self, kind: str, key: str) -> None:
        with self._lock:
            self.requests[kind] += 1
            if self.trace is not None:
                self.trace.append((kind, key))

    def _received(self, data: bytes) -> bytes:
        with self._lock:
            self.bytes_read += len(data)
        return data

    def get(self, key: str) -> bytes:
        import obstore
        check_key(key)
        self._count("GET", key)
        try:
            return self._received(bytes(obstore.get(self._store, key).bytes()))
        except FileNotFoundError:
            raise NotFound(f"no such key {key!r}", key=key) from None
        except Exception as exc:
            raise self._failed("read", key, exc) from None

    def get_range(self, key: str, offset: int, length: int) -> bytes:
        import obstore
        check_key(key)
        if length <= 0:
            return b""
        failure: Exception | None = None
        if offset < MAX_OFFSET:
            self._count("GET", key)
            try:
                return self._received(bytes(obstore.get_range(
                    self._store, key, start=offset, length=min(length, MAX_OFFSET - offset))))
            except FileNotFoundError:
                raise NotFound(f"no such key {key!r}", key=key) from None
            except Exception as exc:
                if _refused(exc):  # a refusal is typed: no HEAD needed to tell it apart
                    raise self._failed("read", key, exc) from None
                failure = exc
        # A range starting at or past the end is empty, as on a file. The server answers it
        # with 416, but obstore 0.12 raises that as a GenericError like any outage, with no
        # status attribute: only its text differs, and the text holds the URL (a prefix named
        # "range-..." would match anything). So decide on the object's size, from a HEAD:
        # absent is NOT_FOUND, storage failing is UNAVAILABLE, and a range inside the object
        # that could not be read is UNAVAILABLE, whatever the error said.
        size = self._size(key)
        if offset >= size:
            return b""
        raise self._unavailable("read", key, failure) from None

    def _size(self, key: str) -> int:
        import obstore
        self._count("HEAD", key)
        try:
            return int(obstore.head(self._store, key)["size"])
        except FileNotFoundError:
            raise NotFound(f"no such key {key!r}", key=key) from None
        except Exception as exc:
            raise self._failed("read", key, exc) from None

    def put_if_absent(self, key: str, data: bytes) -> bool:
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError
        check_key(key)
        uncertain = False  # an earlier attempt may have landed without us seeing the answer
        last: Exception | None = None
        for attempt in range(ATTEMPTS):
            self._count("PUT", key)
            try:
                obstore.put(self._create_store, key, data, mode="create")
                return True
            except (AlreadyExistsError, PreconditionError):
                # 412: the key exists. 409 (a concurrent conditional write in flight) may land
                # here too: look at what is there before deciding.
                try:
                    existing = self.get(key)
                except NotFound:
                    time.sleep(_backoff(attempt))
                    continue
                return uncertain and existing == bytes(data)
            except Exception as exc:
                if not _transient(exc):  # a refusal among them: never retried
                    raise self._failed("write", key, exc) from None
                uncertain = True
                last = exc
                time.sleep(_backoff(attempt))
        raise self._unavailable("write", key, last,
                                f"storage kept failing ({ATTEMPTS} attempts)")

    def replace(self, key: str, data: bytes) -> None:
        """An unconditional PUT: S3 replaces an object atomically, so the client may retry it."""
        import obstore
        check_key(key)
        self._count("PUT", key)
        try:
            obstore.put(self._store, key, data)
        except Exception as exc:
            raise self._failed("write", key, exc) from None

    def delete(self, key: str) -> bool:
        import obstore
        check_key(key)
        if not self.exists(key):
            return False
        self._count("DELETE", key)
        try:
            obstore.delete(self._store, key)
        except FileNotFoundError:
            return False
        except Exception as exc:
            raise self._failed("delete", key, exc) from None
        return True

    def list(self, prefix: str = "") -> Iterator[str]:
        import obstore
        keys = []
        # The client lists whole path segments; list the segment holding the prefix, then filter.
        directory = prefix.rsplit("/", 1)[0] if "/" in prefix else None
        if directory is not None:
            try:
                check_key(directory)  # whole segments every matching key must start with
            except InvalidArgument:
                return iter([])
        try:
            for batch in obstore.list(self._store, prefix=directory, chunk_size=1000):
                self._count("LIST", prefix)
                keys.extend(meta["path"] for meta in batch)
        except Exception as exc:
            raise self._failed("list", prefix, self._list_failure(exc, directory)) from None
        return iter(sorted(k for k in keys if k.startswith(prefix)))

    def _list_failure(self, exc: Exception, directory: str | None) -> Exception:
        """The error to report for a failed listing. obstore 0.12 raises a refused listing
        (403) as a GenericError like any outage, the status only in its text, beside the URL:
        so, as for a failed range, decide on a typed answer instead, a HEAD in the same place
        (a refusal is the HEAD's error; an absent key or an answer is no refusal)."""
        import obstore
        if _refused(exc):
            return exc
        probe_key = f"{directory}/list-probe" if directory else "list-probe"
        self._count("HEAD", probe_key)
        try:
            obstore.head(self._store, probe_key)
        except Exception as probe:
            if _refused(probe):
                return probe
        return exc

    def modified(self, key: str) -> float:
        import obstore
        check_key(key)
        self._count("HEAD", key)
        try:
            return obstore.head(self._store, key)["last_modified"].timestamp()
        except FileNotFoundError:
            raise NotFound(f"no such key {key!r}", key=key) from None
        except Exception as exc:
            raise self._failed("read", key, exc) from None

    def exists(self, key: str) -> bool:
        import obstore
        check_key(key)
        self._count("HEAD", key)
        try:
            obstore.head(self._store, key)
            return True
        except FileNotFoundError:
            return False
        except Exception as exc:
            raise self._failed("read", key, exc) from None


def _seconds(s: float):
    import datetime
    return datetime.timedelta(seconds=s)


def _backoff(attempt: int) -> float:
    return BACKOFF_S * (2 ** attempt) * (0.5 + random.random())


def _transient(exc: Exception) -> bool:
    from obstore.exceptions import (InvalidPathError, NotSupportedError, PermissionDeniedError,
                                    UnauthenticatedError)
    return not isinstance(exc, (PermissionDeniedError, UnauthenticatedError, InvalidPathError,
                                NotSupportedError))


def _refused(exc: Exception) -> bool:
    """Whether the store refused the request (403, 401), by the client's error type."""
    from obstore.exceptions import PermissionDeniedError, UnauthenticatedError
    return isinstance(exc, (PermissionDeniedError, UnauthenticatedError))


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__

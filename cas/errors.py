"""Typed errors: every refusal carries a stable code, an optional reason and its context."""

from __future__ import annotations

from typing import Any


class CasError(Exception):
    """Base of every error cas raises on purpose.

    `code` is one of a small stable set (see docs/errors in docs/cli.md); `reason` narrows it
    for callers that branch on it; `fields` carries the context (digests, keys, paths).
    """

    code = "INTERNAL"
    reason: str | None = None

    def __init__(self, message: str, *, reason: str | None = None, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason
        self.fields = fields

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "reason": self.reason, "message": self.message}
        out.update(self.fields)
        return out


class InvalidArgument(CasError):
    code = "INVALID_ARGUMENT"


class NotFound(CasError):
    code = "NOT_FOUND"


class AlreadyExists(CasError):
    code = "ALREADY_EXISTS"


class FailedPrecondition(CasError):
    code = "FAILED_PRECONDITION"


class Aborted(CasError):
    """A concurrent writer won; the caller may retry on the new state."""

    code = "ABORTED"


class DataLoss(CasError):
    """Stored bytes are corrupt or missing: never returned as data."""

    code = "DATA_LOSS"


class Unavailable(CasError):
    """The storage could not be reached or failed (an outage, a server error, a full disk):
    the request may succeed when retried, and it says nothing of what is stored."""

    code = "UNAVAILABLE"


class PermissionDenied(CasError):
    """The storage refused the request (S3 403 or 401: a wrong secret, an unknown key id, a
    bucket policy; a file or directory this process may not read or write). Not retried: the
    same credentials get the same answer. Like UNAVAILABLE, it says nothing of what is stored."""

    code = "PERMISSION_DENIED"


# A read that could not be made, not a verdict on what is stored: whatever turns what it reads
# into a report (fsck's problems, gc's and erasure's "damaged: delete it") lets these through,
# so an outage or a wrong secret is never reported as damage, nor a skipped read as a pass.
STORAGE_FAILURES = (Unavailable, PermissionDenied)


class InvalidJSONValue(InvalidArgument):
    """A value that canonical JSON cannot carry; `path` names where (`$.steps[3].arguments`)."""

    reason = "INVALID_JSON_VALUE"

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}", path=path)
        self.path = path


class DigestMismatch(DataLoss):
    reason = "DIGEST_MISMATCH"

    def __init__(self, expected: str, got: str, where: str = "") -> None:
        at = f" in {where}" if where else ""
        super().__init__(f"digest mismatch{at}: expected {expected}, got {got}",
                         expected=expected, got=got, where=where)
        self.expected = expected
        self.got = got


class CorruptData(DataLoss):
    reason = "CORRUPT"


class UnsupportedFormat(FailedPrecondition):
    reason = "UNSUPPORTED_FORMAT"


class VersionConflict(Aborted):
    reason = "VERSION_CONFLICT"

    def __init__(self, dataset: str, base: int, head: int) -> None:
        super().__init__(
            f"dataset {dataset!r}: version {base + 1} is already sealed, so base {base} is "
            f"not the head (head is {head}); re-read the head and retry",
            dataset=dataset, base=base, head=head)
        self.dataset = dataset
        self.base = base
        self.head = head

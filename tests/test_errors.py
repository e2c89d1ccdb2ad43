"""Typed errors: each class's stable code and reason, the context it carries as fields, and the
JSON shape an interface prints (`{"code", "reason", "message", ...fields}`)."""

import pytest

from cas import errors
from cas.errors import (Aborted, AlreadyExists, CasError, CorruptData, DataLoss, DigestMismatch,
                        FailedPrecondition, InvalidArgument, InvalidJSONValue, NotFound,
                        PermissionDenied, Unavailable, UnsupportedFormat, VersionConflict)

# The codes and reasons are part of the API (docs/cli.md): changing one breaks callers.
CODES = {
    CasError: ("INTERNAL", None),
    InvalidArgument: ("INVALID_ARGUMENT", None),
    NotFound: ("NOT_FOUND", None),
    AlreadyExists: ("ALREADY_EXISTS", None),
    FailedPrecondition: ("FAILED_PRECONDITION", None),
    Aborted: ("ABORTED", None),
    DataLoss: ("DATA_LOSS", None),
    Unavailable: ("UNAVAILABLE", None),
    PermissionDenied: ("PERMISSION_DENIED", None),
    InvalidJSONValue: ("INVALID_ARGUMENT", "INVALID_JSON_VALUE"),
    DigestMismatch: ("DATA_LOSS", "DIGEST_MISMATCH"),
    CorruptData: ("DATA_LOSS", "CORRUPT"),
    UnsupportedFormat: ("FAILED_PRECONDITION", "UNSUPPORTED_FORMAT"),
    VersionConflict: ("ABORTED", "VERSION_CONFLICT"),
}


def test_every_error_class_is_listed():
    defined = {v for v in vars(errors).values()
               if isinstance(v, type) and issubclass(v, CasError)}
    assert defined == set(CODES)


@pytest.mark.parametrize("cls", sorted(CODES, key=lambda c: c.__name__))
def test_each_class_has_its_code_and_reason(cls):
    assert (cls.code, cls.reason) == CODES[cls]
    assert issubclass(cls, Exception)


def test_a_reason_and_context_given_at_the_raise_are_kept():
    err = NotFound("dataset 'd' has no version 3", reason="VERSION_DELETED", dataset="d",
                   version=3)
    assert str(err) == err.message == "dataset 'd' has no version 3"
    assert err.reason == "VERSION_DELETED" and NotFound.reason is None  # the class keeps none
    assert err.fields == {"dataset": "d", "version": 3}
    assert err.to_json() == {"code": "NOT_FOUND", "reason": "VERSION_DELETED",
                             "message": "dataset 'd' has no version 3", "dataset": "d",
                             "version": 3}
    plain = Aborted("retry")
    assert plain.to_json() == {"code": "ABORTED", "reason": None, "message": "retry"}


def test_a_subclass_reason_stands_unless_the_raise_names_another():
    assert CorruptData("bad", key="k").to_json() == {
        "code": "DATA_LOSS", "reason": "CORRUPT", "message": "bad", "key": "k"}
    assert CorruptData("bad", reason="OBJECT_MISSING").reason == "OBJECT_MISSING"


def test_digest_mismatch_names_both_digests_and_where():
    err = DigestMismatch("b3:aa", "b3:bb", "packs/p.pack")
    assert (err.expected, err.got) == ("b3:aa", "b3:bb")
    assert err.message == "digest mismatch in packs/p.pack: expected b3:aa, got b3:bb"
    assert err.fields == {"expected": "b3:aa", "got": "b3:bb", "where": "packs/p.pack"}
    assert isinstance(err, DataLoss)
    assert DigestMismatch("b3:aa", "b3:bb").message == "digest mismatch: expected b3:aa, got b3:bb"


def test_version_conflict_names_the_dataset_base_and_head():
    err = VersionConflict("evals", 2, 5)
    assert (err.dataset, err.base, err.head) == ("evals", 2, 5)
    assert err.fields == {"dataset": "evals", "base": 2, "head": 5}
    assert "version 3 is already sealed" in err.message and "head is 5" in err.message
    assert isinstance(err, Aborted)


def test_invalid_json_value_names_its_path():
    err = InvalidJSONValue("$.steps[3].arguments.x", "NaN is not JSON")
    assert err.path == "$.steps[3].arguments.x" and err.fields == {"path": err.path}
    assert err.message == "$.steps[3].arguments.x: NaN is not JSON"
    assert isinstance(err, InvalidArgument) and err.to_json()["reason"] == "INVALID_JSON_VALUE"


def test_a_refusal_is_its_own_class_and_with_an_outage_no_verdict_on_the_data():
    """PERMISSION_DENIED is neither an outage (what retries catch) nor damage (what fsck
    reports): the storage failures are exactly the outage and the refusal."""
    import cas
    assert cas.PermissionDenied is PermissionDenied and cas.Unavailable is Unavailable
    assert not issubclass(PermissionDenied, (Unavailable, DataLoss))
    assert errors.STORAGE_FAILURES == (Unavailable, PermissionDenied)
    assert not any(issubclass(c, errors.STORAGE_FAILURES) for c in CODES
                   if c not in errors.STORAGE_FAILURES)
    err = PermissionDenied("storage refused to read 'config' in s3://b/p at http://h: HTTP 403",
                           key="config", location="s3://b/p", endpoint="http://h", status=403)
    assert err.to_json() == {"code": "PERMISSION_DENIED", "reason": None,
                             "message": err.message, "key": "config", "location": "s3://b/p",
                             "endpoint": "http://h", "status": 403}

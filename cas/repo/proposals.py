"""Staged proposals as stored: one read by its confirm token, the version a token sealed, and
the deletion of one (with the idempotency claim naming it) that gc or an erasure collects.

Promotion and removal stage them and seal them (cas/repo/promotion.py).
"""

from __future__ import annotations

from cas.errors import NotFound
from cas.format import keys
from cas.format.records import IdempotencyRecord, Proposal, VersionRecord, parse_record_file
from cas.repo import checks


def load_proposal(ctx, name: str, token: str) -> Proposal:
    """The proposal of dataset `name` that the confirm token `token` names."""
    checks.confirm_token(token, optional=False)
    key = keys.proposal_key(name, token)
    try:
        return parse_record_file(ctx.backend.get(key), Proposal, key)
    except NotFound:
        raise NotFound(f"dataset {name!r} has no proposal with confirm token {token} (gc "
                       "deletes a proposal left unsealed for longer than its grace period, and "
                       "an erasure one that holds an erased case; preview again)",
                       reason="PROPOSAL_NOT_FOUND") from None


def sealed_by(ctx, name: str, base: int, token: str) -> VersionRecord | None:
    """The version this token sealed, if any: the one built on `base` (base + 1, or the next
    number above it that was not deleted before it was sealed)."""
    try:
        record = ctx.refs.read_version(name, ctx.refs.next_number(name, base))
    except NotFound:
        return None
    return record if record.proposal == token else None


def delete_proposal(ctx, key: str, proposal: Proposal | None) -> bool:
    """Delete a staged proposal (gc: stale; erasure: it holds an erased case) and the
    idempotency claim naming it, the claim first, so that a retried request stages anew instead
    of finding a proposal that is gone. `proposal` is None if its record is damaged."""
    token = keys.parse_proposal_key(key)[1]
    if proposal is not None:
        ikey = keys.idempotency_key(proposal.dataset, proposal.idempotency_key)
        try:
            claim = parse_record_file(ctx.backend.get(ikey), IdempotencyRecord, ikey)
            if claim.token == token:
                ctx.backend.delete(ikey)
        except NotFound:
            pass
    return ctx.backend.delete(key)

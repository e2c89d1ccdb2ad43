"""Suite results: each case's verdict and the run's, their derived identifiers (run ids, the
result digest), and results read back, merged from shards and compared (docs/suites.md)."""

from __future__ import annotations

import re
from typing import Any, Iterable, Union

import msgspec
from blake3 import blake3

from cas.digest import PREFIX, SUITE_RESULT_DOMAIN, SUITE_RUN_ID_DOMAIN
from cas.errors import FailedPrecondition, InvalidArgument, InvalidJSONValue
from cas.format import encoding

COMPLETED, ERRORED, INCOMPLETE = OUTCOMES = ("COMPLETED", "ERRORED", "INCOMPLETE")
# The exit codes of a run that is not ok. They sit above the CLI's error codes (1-9, cas_cli
# main.py EXIT_CODES), so a CI script tells "the suite ran and is not green" from "the command
# was refused": 10 when any case ERRORED (the harness or the agent broke: a rerun will not fix
# it), else 11 when any case is INCOMPLETE (timed out, non-terminal, or stopped: it may on a
# rerun).
EXIT_OK, EXIT_ERRORED, EXIT_INCOMPLETE = 0, 10, 11
RESULT_FORMAT = 1

# Derived identifiers, each BLAKE3 in a domain of its own (cas.digest, docs/format.md 3.1).
_RUN_ID = blake3(SUITE_RUN_ID_DOMAIN)
_RESULT_DIGEST = blake3(SUITE_RESULT_DOMAIN)
RUN_ID_PREFIX = "sr-"

_ENCODE = encoding.encode


class SuiteRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    version: str


class Shard(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Shard `index` of `count` (1-based, written `index/count`): the cases at positions p with
    p % count == index - 1. `cases` is the whole suite's case count (set in results)."""

    index: int
    count: int
    cases: Union[int, None] = None

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: Any) -> "Shard":
        """`i/n` with 1 <= i <= n (ASCII digits), a Shard, or a pair (i, n)."""
        if isinstance(text, Shard):
            return _check_shard(text.index, text.count, str(text))
        if isinstance(text, tuple) and len(text) == 2:
            return _check_shard(text[0], text[1], f"{text[0]}/{text[1]}")
        m = _SHARD_RE.match(text) if isinstance(text, str) else None
        if m is None:
            raise InvalidArgument(f"shard {encoding.describe(text)} is not i/n (e.g. 2/4: the "
                                  "second of four shards)", reason="INVALID_SHARD")
        return _check_shard(int(m[1]), int(m[2]), text)

    def positions(self, total: int) -> range:
        return range(self.index - 1, total, self.count)


_SHARD_RE = re.compile(r"([0-9]{1,7})/([0-9]{1,7})\Z", re.ASCII)


def _check_shard(index: Any, count: Any, text: str) -> Shard:
    if not (type(index) is int and type(count) is int and 1 <= index <= count):
        raise InvalidArgument(f"shard {text!r} is not i/n with 1 <= i <= n (e.g. 2/4)",
                              reason="INVALID_SHARD")
    return Shard(index, count)


class CaseResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One case's verdict. `answer` (a JSON value) and `scores` are set only when COMPLETED;
    `reason` says why a case is not (and is None when it is)."""

    id: str
    position: int  # 0-based index of the case in the suite
    run_id: str
    outcome: str
    answer: Any = None
    reason: Union[str, None] = None
    scores: Union[dict[str, Union[bool, int, float, str]], None] = None


class SuiteResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                  omit_defaults=True):
    """The verdict of one run of a suite (or of one shard of it), results in suite order."""

    suite: SuiteRef
    seed: int
    ok: bool
    exit_code: int
    digest: str
    counts: dict[str, int]
    results: tuple[CaseResult, ...]
    shard: Union[Shard, None] = None

    def to_json(self) -> dict[str, Any]:
        """The object `cas suite run --json` prints."""
        return msgspec.to_builtins(self)


# -- derived identifiers --------------------------------------------------------------------
def run_id(suite_name: str, suite_version: str, case_id: str, seed: int = 0) -> str:
    """`sr-` + 32 hex: BLAKE3("cas:suite-run-id" 0x00 || canonical JSON of
    [suite_name, suite_version, case_id, seed]), truncated to 128 bits. Two machines running
    the same suite with the same seed agree on every run id without talking."""
    h = _RUN_ID.copy()
    h.update(_ENCODE((suite_name, suite_version, case_id, seed)))
    return RUN_ID_PREFIX + h.hexdigest()[:32]


def result_digest(suite: SuiteRef, results: Iterable[CaseResult],
                  shard: Shard | None = None) -> str:
    """`b3:` + BLAKE3("cas:suite-result" 0x00 || canonical JSON of {"format": 1, "suite":
    {name, version}, "results": [every CaseResult, in suite order]} (and "shard" {index,
    count, cases} for a shard)). Answers, outcomes, reasons, scores and run ids (hence the
    seed) are covered; timings are never in a result."""
    doc: dict[str, Any] = {"format": RESULT_FORMAT, "suite": suite, "results": list(results)}
    if shard is not None:
        doc["shard"] = shard
    h = _RESULT_DIGEST.copy()
    h.update(_ENCODE(doc))
    return PREFIX + h.hexdigest()


def finish(suite: SuiteRef, seed: int, results: list[CaseResult],
           shard: Shard | None) -> SuiteResult:
    """The verdict of `results` (every case of the suite or shard, in suite order)."""
    counts = {COMPLETED: 0, ERRORED: 0, INCOMPLETE: 0}
    for r in results:
        counts[r.outcome] += 1
    ok = counts[COMPLETED] == len(results)
    code = EXIT_OK if ok else EXIT_ERRORED if counts[ERRORED] else EXIT_INCOMPLETE
    return SuiteResult(suite=suite, seed=seed, ok=ok, exit_code=code,
                       digest=result_digest(suite, results, shard), counts=counts,
                       results=tuple(results), shard=shard)


# -- reading results back (cas suite merge, cas suite diff) ---------------------------------
def as_result(value: Any, source: str = "result") -> SuiteResult:
    """A SuiteResult, from itself, the object `cas suite run --json` prints (a `recorded` key
    it may hold is ignored), or that object's JSON bytes or text. Its digest, counts, ok and
    exit code are checked against its results: an edited result is refused."""
    if isinstance(value, SuiteResult):
        return value
    if isinstance(value, (bytes, bytearray, str)):
        try:
            value = encoding.decode_json(value)
        except InvalidArgument as exc:
            raise encoding.in_context(exc, source) from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{source} is not a suite result (the JSON object of `cas suite "
                              f"run --json`), but {encoding.describe(value)}",
                              reason="INVALID_SUITE_RESULT")
    value = {k: v for k, v in value.items() if k != "recorded"}
    try:
        result = msgspec.convert(value, SuiteResult)
    except msgspec.ValidationError as exc:
        raise InvalidArgument(f"{source} is not a suite result: {exc}",
                              reason="INVALID_SUITE_RESULT") from None
    for r in result.results:
        if r.outcome not in OUTCOMES:
            raise InvalidArgument(f"{source}: case {r.id} has outcome {r.outcome!r}; known: "
                                  f"{', '.join(OUTCOMES)}", reason="INVALID_SUITE_RESULT")
    try:
        encoding.check_json([r.answer for r in result.results], "answers")
        again = finish(result.suite, result.seed, list(result.results), result.shard)
    except (InvalidJSONValue, KeyError):
        again = None
    if again is None or again != result:
        raise InvalidArgument(f"{source}: its digest, counts, ok or exit code do not match its "
                              "results (edited, or not written by cas suite run)",
                              reason="RESULT_DIGEST_MISMATCH")
    return result


def merge(results: Iterable[Any], sources: Iterable[str] | None = None) -> SuiteResult:
    """The shards of one run (each as `as_result` reads it) as the result of one unsharded
    run: suite order restored, the same digest. Refused: results of different suites or
    seeds, a result that is not a shard, a shard missing or given twice (named)."""
    results = list(results)
    names = list(sources) if sources is not None else [f"result {i + 1}"
                                                       for i in range(len(results))]
    if len(names) != len(results):
        raise InvalidArgument("merge: give one source name per result")
    if not results:
        raise InvalidArgument("merge: no shards given", reason="SHARD_MISSING")
    parsed = [as_result(r, s) for r, s in zip(results, names)]
    first, src0 = parsed[0], names[0]
    for r, src in zip(parsed, names):
        if r.shard is None:
            raise InvalidArgument(f"{src} is not a shard (run with --shard i/n): there is "
                                  "nothing to merge it with", reason="NOT_A_SHARD")
        if r.suite != first.suite:
            raise FailedPrecondition(
                f"{src} is a result of suite {r.suite.name} {r.suite.version}, {src0} of "
                f"{first.suite.name} {first.suite.version}: results compare only within one "
                "suite version", reason="SUITE_VERSION_MISMATCH",
                versions=[first.suite.version, r.suite.version])
        if r.seed != first.seed:
            raise InvalidArgument(f"{src} was run with seed {r.seed}, {src0} with seed "
                                  f"{first.seed}", reason="SEED_MISMATCH")
        if (r.shard.count, r.shard.cases) != (first.shard.count, first.shard.cases):
            raise InvalidArgument(f"{src} is shard {r.shard} of {r.shard.cases} cases, "
                                  f"{src0} shard {first.shard} of {first.shard.cases}: not "
                                  "shards of one split", reason="SHARD_MISMATCH")
    count, total = first.shard.count, first.shard.cases or 0
    by_index: dict[int, str] = {}
    for r, src in zip(parsed, names):
        if r.shard.index in by_index:
            raise InvalidArgument(f"shard {r.shard} is given twice ({by_index[r.shard.index]} "
                                  f"and {src})", reason="SHARD_REPEATED",
                                  shard=str(r.shard))
        by_index[r.shard.index] = src
        expected = list(Shard(r.shard.index, count).positions(total))
        if [c.position for c in r.results] != expected:
            raise InvalidArgument(f"{src}: shard {r.shard} does not hold the positions the "
                                  "split gives it (position % count == index - 1)",
                                  reason="SHARD_MISMATCH", shard=str(r.shard))
    missing = [i for i in range(1, count + 1) if i not in by_index]
    if missing:
        shown = ", ".join(f"{i}/{count}" for i in missing)
        raise InvalidArgument(f"shard{'s' if len(missing) > 1 else ''} {shown} "
                              f"{'are' if len(missing) > 1 else 'is'} missing",
                              reason="SHARD_MISSING", missing=[f"{i}/{count}" for i in missing])
    merged = sorted((c for r in parsed for c in r.results), key=lambda c: c.position)
    ids = {c.id for c in merged}
    if len(ids) != len(merged):
        raise InvalidArgument("merge: the shards hold one case id twice",
                              reason="SHARD_MISMATCH")
    return finish(first.suite, first.seed, merged, None)


def diff(a: Any, b: Any, allow_versions: bool = False) -> dict[str, Any]:
    """The cases whose answer or outcome changed from result `a` to result `b`:
    {"changed": [{"id", "before", "after"}], "unchanged": N}, `before`/`after` being
    {outcome, answer, reason} (None for a case absent from that side), in `b`'s order then
    `a`'s. Two different suites (name or version) are refused unless `allow_versions`."""
    a, b = as_result(a, "before"), as_result(b, "after")
    if a.suite != b.suite and not allow_versions:
        raise FailedPrecondition(
            f"the results are of different suites ({a.suite.name} {a.suite.version} and "
            f"{b.suite.name} {b.suite.version}): results compare only within one suite "
            "version (allow it explicitly to compare anyway)",
            reason="SUITE_VERSION_MISMATCH", versions=[a.suite.version, b.suite.version])

    def view(r: CaseResult | None) -> dict | None:
        return None if r is None else {"outcome": r.outcome, "answer": r.answer,
                                       "reason": r.reason}
    before = {r.id: r for r in a.results}
    after_ids = set()
    changed, unchanged = [], 0
    for r in b.results:
        after_ids.add(r.id)
        old = before.get(r.id)
        if old is not None and old.outcome == r.outcome and \
                _ENCODE(old.answer) == _ENCODE(r.answer):
            unchanged += 1
        else:
            changed.append({"id": r.id, "before": view(old), "after": view(r)})
    changed += [{"id": r.id, "before": view(r), "after": None}
                for r in a.results if r.id not in after_ids]
    return {"changed": changed, "unchanged": unchanged}

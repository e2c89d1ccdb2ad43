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
MAX_REPEAT = 10_000  # repetitions of each case in one run

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
    """One repetition of one case: its verdict. `answer` (a JSON value) and `scores` are set
    only when COMPLETED; `reason` says why a case is not (and is None when it is).
    `repetition` (0-based) and `seed` (that repetition's own seed, `repetition_seed`) are
    written only in a result of more than one repetition (docs/suites.md "Repetitions"); in a
    SuiteResult `seed` is always an int (`finish` fills it)."""

    id: str
    position: int  # 0-based index of the case in the suite
    run_id: str
    outcome: str
    answer: Any = None
    reason: Union[str, None] = None
    scores: Union[dict[str, Union[bool, int, float, str]], None] = None
    repetition: int = 0
    seed: Union[int, None] = None


class SuiteResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                  omit_defaults=True):
    """The verdict of one run of a suite (or of one shard of it): one entry per (case,
    repetition), in suite order then repetition order; `repeat` repetitions were asked for
    each case. `counts` count entries (repetitions), not cases."""

    suite: SuiteRef
    seed: int
    ok: bool
    exit_code: int
    digest: str
    counts: dict[str, int]
    results: tuple[CaseResult, ...]
    shard: Union[Shard, None] = None
    repeat: int = 1

    def to_json(self) -> dict[str, Any]:
        """The object `cas suite run --json` prints. With one repetition, the entries leave
        out `repetition` and `seed` (0 and the run's seed): today's bytes."""
        out = msgspec.to_builtins(self)
        if self.repeat == 1:
            for entry in out["results"]:
                del entry["repetition"], entry["seed"]
        return out


# -- derived identifiers --------------------------------------------------------------------
def run_id(suite_name: str, suite_version: str, case_id: str, seed: int = 0,
           repetition: int = 0) -> str:
    """`sr-` + 32 hex: BLAKE3("cas:suite-run-id" 0x00 || canonical JSON of
    [suite_name, suite_version, case_id, seed]), truncated to 128 bits; for a `repetition`
    above 0, of [suite_name, suite_version, case_id, seed, repetition] (`seed` being the run's
    seed), so repetition 0 keeps the run id a run without repetitions has. Two machines
    running the same suite with the same seed agree on every run id without talking."""
    h = _RUN_ID.copy()
    h.update(_ENCODE((suite_name, suite_version, case_id, seed) if repetition == 0 else
                     (suite_name, suite_version, case_id, seed, repetition)))
    return RUN_ID_PREFIX + h.hexdigest()[:32]


def repetition_seed(seed: int, repetition: int) -> int:
    """The seed of one repetition of a run with seed `seed`: `seed` itself for repetition 0,
    else the first 8 bytes, as a signed big-endian integer, of BLAKE3("cas:suite-run-id" 0x00
    || canonical JSON of ["seed", seed, repetition]). Every repetition gets its own seed and
    any machine derives the same one."""
    if repetition == 0:
        return seed
    h = _RUN_ID.copy()
    h.update(_ENCODE(("seed", seed, repetition)))
    return int.from_bytes(h.digest(8), "big", signed=True)


def _stored(results: Iterable[CaseResult], repeat: int) -> list:
    """The entries as a result writes them: without `repetition` and `seed` for one
    repetition (so such a result keeps the bytes and digest it had before repetitions)."""
    if repeat != 1:
        return list(results)
    return [{"id": r.id, "position": r.position, "run_id": r.run_id, "outcome": r.outcome,
             "answer": r.answer, "reason": r.reason, "scores": r.scores} for r in results]


def result_digest(suite: SuiteRef, results: Iterable[CaseResult],
                  shard: Shard | None = None, repeat: int = 1) -> str:
    """`b3:` + BLAKE3("cas:suite-result" 0x00 || canonical JSON of {"format": 1, "suite":
    {name, version}, "results": [every entry, in suite then repetition order]} (and "shard"
    {index, count, cases} for a shard; "repeat": N for N > 1 repetitions, when each entry
    also holds its `repetition` and `seed`). Answers, outcomes, reasons, scores and run ids
    (hence the seed) of every repetition are covered; timings are never in a result."""
    doc: dict[str, Any] = {"format": RESULT_FORMAT, "suite": suite,
                           "results": _stored(results, repeat)}
    if shard is not None:
        doc["shard"] = shard
    if repeat != 1:
        doc["repeat"] = repeat
    h = _RESULT_DIGEST.copy()
    h.update(_ENCODE(doc))
    return PREFIX + h.hexdigest()


def _seeded(seed: int, results: Iterable[CaseResult]) -> list[CaseResult]:
    """`results` with every missing per-repetition seed filled in."""
    return [r if r.seed is not None else
            msgspec.structs.replace(r, seed=repetition_seed(seed, r.repetition))
            for r in results]


def finish(suite: SuiteRef, seed: int, results: list[CaseResult],
           shard: Shard | None, repeat: int = 1) -> SuiteResult:
    """The verdict of `results` (every repetition of every case of the suite or shard, in
    suite order then repetition order); a missing per-repetition seed is filled in."""
    results = _seeded(seed, results)
    counts = {COMPLETED: 0, ERRORED: 0, INCOMPLETE: 0}
    for r in results:
        counts[r.outcome] += 1
    ok = counts[COMPLETED] == len(results)
    code = EXIT_OK if ok else EXIT_ERRORED if counts[ERRORED] else EXIT_INCOMPLETE
    return SuiteResult(suite=suite, seed=seed, ok=ok, exit_code=code,
                       digest=result_digest(suite, results, shard, repeat), counts=counts,
                       results=tuple(results), shard=shard, repeat=repeat)


def check_repeat(repeat: Any) -> int:
    """`repeat` when it is a whole number of repetitions from 1 to MAX_REPEAT."""
    if type(repeat) is not int or not 1 <= repeat <= MAX_REPEAT:
        raise InvalidArgument(f"repeat {encoding.describe(repeat)} is not a whole number of "
                              f"repetitions from 1 to {MAX_REPEAT}", reason="INVALID_REPEAT")
    return repeat


# -- reading results back (cas suite merge, cas suite diff) ---------------------------------
def as_result(value: Any, source: str = "result") -> SuiteResult:
    """A SuiteResult, from itself, the object `cas suite run --json` prints (the `recorded`,
    `summary` and `resolved` keys it may hold beside the result are ignored), or that object's
    JSON bytes or text. Its digest, counts, ok and exit code are checked against its results:
    an edited result is refused."""
    if isinstance(value, SuiteResult):
        return value
    parsed = isinstance(value, (bytes, bytearray, str))
    if parsed:
        # Decoded straight into the result (a file of 10,000 cases x 10 repetitions is read
        # in a third of the time a decode, then a conversion, takes), by the strict reader:
        # what it decodes is canonical-JSON-safe, so the answers need no check after it.
        try:
            printed = encoding.parse_json(value, _PRINTED_DECODER)
        except InvalidArgument as exc:
            if exc.reason is not None or isinstance(exc, InvalidJSONValue):  # too deep, ...
                raise encoding.in_context(exc, source) from None
            if "Expected `object`" in exc.message:
                raise InvalidArgument(f"{source} is not a suite result (the JSON object of `cas "
                                      "suite run --json`)", reason="INVALID_SUITE_RESULT") \
                    from None
            raise InvalidArgument(f"{source} is not a suite result: {exc.message}",
                                  reason="INVALID_SUITE_RESULT") from None
        result = SuiteResult(**{f: getattr(printed, f) for f in SuiteResult.__struct_fields__})
    else:
        if not isinstance(value, dict):
            raise InvalidArgument(f"{source} is not a suite result (the JSON object of `cas "
                                  f"suite run --json`), but {encoding.describe(value)}",
                                  reason="INVALID_SUITE_RESULT")
        value = {k: v for k, v in value.items() if k not in _PRINTED_BESIDE}
        try:
            result = msgspec.convert(value, SuiteResult)
        except msgspec.ValidationError as exc:
            raise InvalidArgument(f"{source} is not a suite result: {exc}",
                                  reason="INVALID_SUITE_RESULT") from None
    check_repeat(result.repeat)
    for r in result.results:
        if r.outcome not in OUTCOMES:
            raise InvalidArgument(f"{source}: case {r.id} has outcome {r.outcome!r}; known: "
                                  f"{', '.join(OUTCOMES)}", reason="INVALID_SUITE_RESULT")
    _check_repetitions(result, source)
    try:
        if not parsed:
            encoding.check_json([r.answer for r in result.results], "answers")
        result = msgspec.structs.replace(result, results=tuple(_seeded(result.seed,
                                                                       result.results)))
        again = finish(result.suite, result.seed, list(result.results), result.shard,
                       result.repeat)
    except (InvalidJSONValue, KeyError):
        again = None
    if again is None or again != result:
        raise InvalidArgument(f"{source}: its digest, counts, ok or exit code do not match its "
                              "results (edited, or not written by cas suite run)",
                              reason="RESULT_DIGEST_MISMATCH")
    return result


# Keys `cas suite run --json` prints beside a result, which are not part of it.
_PRINTED_BESIDE = ("recorded", "summary", "resolved")  # `resolved`: a name the lock resolved


class _Printed(SuiteResult, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What `cas suite run --json` prints: the result, and beside it (ignored) _PRINTED_BESIDE."""

    recorded: Any = None
    summary: Any = None
    resolved: Any = None


_PRINTED_DECODER = msgspec.json.Decoder(_Printed)


def _check_repetitions(result: SuiteResult, source: str) -> None:
    """Entries in (position, repetition) order, each pair once, repetitions below `repeat`;
    with one repetition no entry names a repetition or seed, with more each names both and
    its seed is the one `repetition_seed` derives."""
    seeds: dict[int, int] = {}
    last = (-1, -1)
    for r in result.results:
        if result.repeat == 1:
            bad = r.repetition != 0 or (r.seed is not None and r.seed != result.seed)
        else:
            if r.seed is None or not 0 <= r.repetition < result.repeat:
                bad = True
            else:
                want = seeds.get(r.repetition)
                if want is None:
                    want = seeds[r.repetition] = repetition_seed(result.seed, r.repetition)
                bad = r.seed != want
        key = (r.position, r.repetition)
        if bad or key <= last:
            raise InvalidArgument(
                f"{source}: case {r.id} repetition {r.repetition} is out of order, repeated, "
                f"or has a repetition or seed a run of {result.repeat} repetition"
                f"{'s' if result.repeat > 1 else ''} with seed {result.seed} does not give it",
                reason="INVALID_SUITE_RESULT")
        last = key


def merge(results: Iterable[Any], sources: Iterable[str] | None = None) -> SuiteResult:
    """The shards of one run (each as `as_result` reads it) as the result of one unsharded
    run: suite order restored, the same digest (a shard holds every repetition of its cases).
    Refused: results of different suites, seeds or repetitions, a result that is not a
    shard, a shard missing or given twice (named)."""
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
        if r.repeat != first.repeat:
            raise InvalidArgument(f"{src} was run with {r.repeat} repetitions, {src0} with "
                                  f"{first.repeat}", reason="REPEAT_MISMATCH")
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
        expected = [(p, k) for p in Shard(r.shard.index, count).positions(total)
                    for k in range(first.repeat)]
        if [(c.position, c.repetition) for c in r.results] != expected:
            raise InvalidArgument(f"{src}: shard {r.shard} does not hold the positions the "
                                  "split gives it (position % count == index - 1)",
                                  reason="SHARD_MISMATCH", shard=str(r.shard))
    missing = [i for i in range(1, count + 1) if i not in by_index]
    if missing:
        shown = ", ".join(f"{i}/{count}" for i in missing)
        raise InvalidArgument(f"shard{'s' if len(missing) > 1 else ''} {shown} "
                              f"{'are' if len(missing) > 1 else 'is'} missing",
                              reason="SHARD_MISSING", missing=[f"{i}/{count}" for i in missing])
    merged = sorted((c for r in parsed for c in r.results),
                    key=lambda c: (c.position, c.repetition))
    ids = {(c.id, c.repetition) for c in merged}
    if len(ids) != len(merged):
        raise InvalidArgument("merge: the shards hold one case id twice",
                              reason="SHARD_MISMATCH")
    return finish(first.suite, first.seed, merged, None, first.repeat)


def diff(a: Any, b: Any, allow_versions: bool = False) -> dict[str, Any]:
    """The cases whose answer or outcome changed from result `a` to result `b`:
    {"changed": [{"id", "before", "after"}], "unchanged": N}, `before`/`after` being
    {outcome, answer, reason} (None for a case absent from that side), in `b`'s order then
    `a`'s. Repetitions pair by number; with more than one, each change names its
    `repetition`. Two different suites (name or version) are refused unless `allow_versions`."""
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
    many = a.repeat > 1 or b.repeat > 1  # then each change names its repetition

    def entry(r: CaseResult, old: CaseResult | None, new: CaseResult | None) -> dict:
        out = {"id": r.id, "before": view(old), "after": view(new)}
        if many:
            out["repetition"] = r.repetition
        return out
    before = {(r.id, r.repetition): r for r in a.results}
    after_ids = set()
    changed, unchanged = [], 0
    for r in b.results:
        key = (r.id, r.repetition)
        after_ids.add(key)
        old = before.get(key)
        if old is not None and old.outcome == r.outcome and \
                _ENCODE(old.answer) == _ENCODE(r.answer):
            unchanged += 1
        else:
            changed.append(entry(r, old, r))
    changed += [entry(r, r, None) for r in a.results if (r.id, r.repetition) not in after_ids]
    return {"changed": changed, "unchanged": unchanged}

"""Hostile input: how deep JSON may nest, what the messages say, and that every public call
(the `cas` exports, the methods of `Repository`, the CLI commands) refuses anything with a
CasError, never a traceback."""

from __future__ import annotations

import inspect
import io
import json
import os
import shutil

import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cas
from cas import EncodedCase
from cas.errors import CasError
from cas.format import encoding
from cas.repo.promotion import parse_subjects
from cas.repo.reviews import read_review_requests
from cas_cli.main import EXIT_CODES, cli

LIMIT = encoding.MAX_DEPTH
CODES = set(EXIT_CODES) - {"INTERNAL"}
RUN = {"run_id": "r-1", "tenant": "acme", "person": "p-1", "steps": []}


@pytest.fixture(autouse=True)
def person(monkeypatch, tmp_path):
    monkeypatch.setenv("CAS_USER", "Ada <ada@example.com>")
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "user-config.json"))
    monkeypatch.delenv("CAS_REPO", raising=False)


def nested(depth: int, leaf="x", kind: str = "list"):
    """A value of `depth` levels of arrays (or objects), built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


def nested_json(depth: int, kind: str = "list") -> bytes:
    if kind == "list":
        return b"[" * depth + b"1" + b"]" * depth
    return b'{"k":' * depth + b"1" + b"}" * depth


def too_deep(exc: CasError) -> None:
    assert exc.code == "INVALID_ARGUMENT" and exc.reason == "JSON_TOO_DEEP"
    assert exc.fields["max_depth"] == LIMIT and f"{LIMIT} levels" in exc.message


# -- the depth limit ----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["list", "dict"])
@pytest.mark.parametrize("depth", [LIMIT + 1, 1000, 100_000])
def test_json_deeper_than_the_limit_is_refused_however_deep(kind, depth):
    with pytest.raises(cas.InvalidArgument) as info:  # not RecursionError
        encoding.decode_json(nested_json(depth, kind))
    too_deep(info.value)
    first = ("$" + "[0]" * LIMIT) if kind == "list" else ("$" + ".k" * LIMIT)
    assert info.value.fields["path"] == first  # where the 101st level begins
    with pytest.raises(cas.InvalidArgument) as info:
        encoding.check_json(nested(depth, kind=kind))
    too_deep(info.value)
    assert info.value.fields["path"] == first


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_json_at_the_limit_is_accepted(kind):
    assert encoding.encode(encoding.decode_json(nested_json(LIMIT, kind))) == \
        nested_json(LIMIT, kind)
    encoding.check_json(nested(LIMIT, kind=kind))
    # brackets inside strings do not count
    encoding.decode_json(json.dumps(["[" * 500, {"k": "{" * 500}]).encode())


def test_a_value_that_contains_itself_is_refused():
    loop: list = []
    loop.append(loop)
    with pytest.raises(cas.InvalidArgument) as info:
        encoding.check_json({"input": loop})
    too_deep(info.value)


def run_line(input_value_json: bytes) -> bytes:
    return b'{"run_id":"r-deep","tenant":"t","steps":[],"input":' + input_value_json + b"}\n"


@pytest.fixture
def repo(tmp_path):
    repo = cas.init(str(tmp_path / "repo"))
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=[{"input": "a"}, {"input": "b", "person": "p-1"}])
    repo.import_runs([dict(RUN)])
    return repo


def test_every_json_entry_point_refuses_deep_nesting(repo, tmp_path):
    deep = nested_json(100_000)
    before = sorted(repo.backend.list(""))
    # runs: JSON Lines and Python values
    with pytest.raises(cas.InvalidArgument) as info:
        repo.import_runs(io.BytesIO(run_line(b"1") + run_line(deep)))
    too_deep(info.value)
    assert info.value.fields["line"] == 2 and info.value.message.startswith("input line 2: $.input")
    with pytest.raises(cas.InvalidArgument) as info:
        repo.import_runs([dict(RUN, input=nested(1000))])
    too_deep(info.value)
    assert info.value.fields["path"].startswith("$[0].input[0]")
    # cases: JSON Lines, dicts, Case objects
    with pytest.raises(cas.InvalidArgument) as info:
        repo.commit("evals", base=1, add=cas.read_cases_jsonl(
            io.BytesIO(b'{"input": 1}\n{"input": ' + deep + b"}\n"), "cases.jsonl"))
    too_deep(info.value)
    assert info.value.message.startswith("cases.jsonl line 2: $.input[0][0]")
    for case in ({"input": nested(1000)}, cas.Case(input=nested(1000))):
        with pytest.raises(cas.InvalidArgument) as info:
            repo.commit("evals", base=1, add=[case])
        too_deep(info.value)
    # reviews, subjects, plans, proofs, runs to diff against, pins, scores
    line = b'{"run_id": "r-1", "metric": "m", "label": ' + deep + b"}\n"
    with pytest.raises(cas.InvalidArgument) as info:
        read_review_requests(io.BytesIO(line), "reviews.jsonl")
    assert info.value.fields["line"] == 1
    for parse in (lambda: parse_subjects(deep, "s.json"),
                  lambda: repo.promote("evals", [{"subject_kind": "agent_run",
                                                  "subject_ref": nested(1000)}], "k"),
                  lambda: cas.parse_plan(deep), lambda: cas.parse_plan({"tools": nested(1000)}),
                  lambda: cas.verify_proof(b'{"root":"x","case_id":"y","nodes":' + deep + b"}"),
                  lambda: cas.verify_proof({"root": "x", "case_id": "y", "nodes": nested(1000)}),
                  lambda: cas.diff_runs({"input": 1}, b'{"input": ' + deep + b"}"),
                  lambda: cas.encode_case({"input": nested(100_000, kind="dict")})):
        with pytest.raises(cas.InvalidArgument) as info:
            parse()
        assert info.value.reason in ("JSON_TOO_DEEP", "INVALID_PROOF", "INVALID_PLAN")
        assert f"{LIMIT} levels" in info.value.message
    for call in (lambda: cas.Pin.parse(nested(100_000)), lambda: repo.resolve_pin(nested(1000)),
                 lambda: repo.record_score(repo.pin("evals", 1), metric=nested(100_000),
                                           value=1),
                 lambda: repo.record_score(repo.pin("evals", 1), metric="m",
                                           value=nested(100_000))):
        with pytest.raises(cas.InvalidArgument):
            call()
    assert sorted(repo.backend.list("")) == before
    assert repo.fsck().ok


def test_a_run_as_deep_as_real_traces_get_is_accepted(repo):
    # the run itself, its steps, a step and its arguments take 4 levels: 96 are left for the
    # arguments' own nesting (a JSON Schema, a DOM tree)
    step = {"type": "tool_call", "tool_name": "t", "arguments": {"tree": nested(LIMIT - 4)}}
    assert repo.import_runs([dict(RUN, run_id="r-deep", steps=[step])]).new == ["r-deep"]
    too = {"type": "tool_call", "tool_name": "t", "arguments": {"tree": nested(LIMIT - 3)}}
    with pytest.raises(cas.InvalidArgument) as info:
        repo.import_runs([dict(RUN, run_id="r-deeper", steps=[too])])
    too_deep(info.value)
    assert info.value.fields["path"].startswith("$[0].steps[0].arguments.tree[0]")


# -- messages -----------------------------------------------------------------------------
def test_a_lone_surrogate_is_named_as_such_with_line_and_path(repo):
    for raw in (b'"a\\ud800b"', b'"\\udc00"', b'"\xed\xa0\x80"'):  # escapes, and raw bytes
        with pytest.raises(cas.InvalidJSONValue) as info:
            repo.import_runs(io.BytesIO(run_line(b"1") + run_line(b'{"q": ' + raw + b"}")))
        message = info.value.message
        assert "lone surrogate" in message and "truncated" not in message
        assert message.startswith("input line 2: $.input.q: string holds a lone surrogate (U+D")
        assert info.value.fields == {"line": 2, "path": "$.input.q"}
    with pytest.raises(cas.InvalidJSONValue) as info:  # in a key: named at the object
        encoding.decode_json(b'{"a": {"k\\ud800": 1}}')
    assert info.value.path == "$.a"


def test_a_number_out_of_range_is_named_by_its_path():
    cases = [(b'{"input": [1, {"a b": 1e999}]}', "$.input[1]['a b']", "1e999"),
             (b'{"metadata": {"x": -1e400}}', "$.metadata.x", "-1e400"),
             (b'{"input": ' + b"7" * 5000 + b"}", "$.input", "4300 digits")]
    for data, path, said in cases:
        with pytest.raises(cas.InvalidArgument) as info:
            list(cas.read_cases_jsonl(io.BytesIO(data + b"\n"), "c.jsonl"))
        assert info.value.message.startswith(f"c.jsonl line 1: {path}: number ")
        assert said in info.value.message and "[...]" not in info.value.message
        assert info.value.fields["path"] == path and info.value.fields["line"] == 1
    with pytest.raises(cas.InvalidJSONValue) as info:
        encoding.check_json({"n": 10 ** 5000})
    assert info.value.path == "$.n" and "4300 digits" in info.value.message


def test_a_note_too_long_has_its_own_reason(repo):
    with pytest.raises(cas.InvalidArgument) as info:
        repo.retire("evals", 1, "CONTAMINATED", "x" * 4097)
    assert info.value.reason == "NOTE_TOO_LONG" and info.value.fields["maximum"] == 4096
    assert "at most 4096 characters" in info.value.message and "4097" in info.value.message
    with pytest.raises(cas.InvalidArgument) as info:
        repo.retire("evals", 1, "CONTAMINATED", " ")
    assert info.value.reason == "NOTE_REQUIRED"
    assert repo.version_state("evals", 1) == "ACTIVE"


def test_the_character_that_is_not_printable_is_named(repo):
    with pytest.raises(cas.InvalidArgument) as info:
        repo.import_runs([dict(RUN, run_id="a\u2028b")])
    assert info.value.message == (
        "$[0].run_id: must be at most 256 printable characters; it contains the non-printable "
        "character U+2028 (LINE SEPARATOR) at character 1")
    with pytest.raises(cas.InvalidArgument) as info:
        repo.import_runs([dict(RUN, run_id="x" * 257)])
    assert info.value.message.endswith("it is 257 characters long")
    token = repo.add_reviews([{"run_id": "r-1", "metric": "m", "label": "l"}])
    assert token["confirm_token"].startswith("ct-")
    for request, said in (({"run_id": "r-1", "metric": "a\x1bb", "label": "l"},
                           "review metric must be 1-256 printable characters; it contains the "
                           "control character U+001B at character 1"),):
        with pytest.raises(cas.InvalidArgument) as info:
            repo.add_reviews([request])
        assert info.value.message == said
    with pytest.raises(cas.InvalidArgument) as info:
        repo.promote("evals", [{"subject_kind": "agent_run", "subject_ref": "r-1"}], "k\u200d")
    assert "U+200D (ZERO WIDTH JOINER)" in info.value.message
    with pytest.raises(cas.InvalidArgument) as info:
        repo.create_dataset("tagged", tags=["a\u2029"], admission="direct")
    assert "U+2029 (PARAGRAPH SEPARATOR)" in info.value.message


def test_version_numbers_in_the_api_are_ints_of_at_most_ten_digits(repo):
    for bad in (True, 1.0, "1", "\u0661", 0, -1, 10 ** 10, 10 ** 5000):
        with pytest.raises(cas.InvalidArgument) as info:
            repo.version("evals", bad)
        assert "positive integer" in info.value.message and len(info.value.message) < 200
    assert repo.version("evals", 1).number == 1
    with pytest.raises(cas.InvalidArgument):
        repo.commit("evals", base=True, add=[{"input": "c"}])


def test_a_forged_encoded_case_is_refused_before_it_is_stored(repo):
    before = sorted(repo.backend.list(""))
    real = cas.encode_case({"input": "real"})
    for forged in (EncodedCase("b3:" + "0" * 64, real.data),  # wrong id
                   EncodedCase(real.case_id, real.data, "someone"),  # wrong person
                   EncodedCase(encoding_digest := cas.digest.digest_of("case", b"{}"), b"{}"),
                   EncodedCase(real.case_id, real.data.decode())):
        with pytest.raises(cas.InvalidArgument):
            repo.commit("evals", base=1, add=[forged])
    assert encoding_digest.startswith("b3:")
    assert sorted(repo.backend.list("")) == before
    assert tuple(cas.encode_case(EncodedCase(*real))) == tuple(real)  # a true one is accepted
    assert repo.fsck().ok


def test_verify_proof_takes_a_proof_or_its_json_and_refuses_anything_else(repo):
    case_id = repo.items("evals", 1).items[0]
    proof = repo.prove("evals", 1, case_id)
    text = msgspec.json.encode(proof)
    assert cas.verify_proof(proof) and cas.verify_proof(text) and cas.verify_proof(text.decode())
    assert cas.verify_proof(json.loads(text))
    assert not cas.verify_proof(cas.Proof(root=1, case_id=[], nodes=5))  # not a proof: False
    for bad in ({"root": 1}, {}, 42, None, [proof], b"not json"):
        with pytest.raises(cas.InvalidArgument) as info:
            cas.verify_proof(bad)
        assert info.value.reason == "INVALID_PROOF"
    with pytest.raises(cas.InvalidArgument):
        cas.verify_proof(proof, root=["b3:"])


# -- every public call raises only CasError -----------------------------------------------
class Special:
    """A named value, made fresh for each call (hypothesis prints the name, not the value)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


def _cyclic():
    loop: list = []
    loop.append(loop)
    return loop


DEEP_LIST, DEEP_DICT, DEEP_200 = nested(100_000), nested(100_000, kind="dict"), nested(200)


def _specials(ctx: dict) -> dict:
    return {  # the deep values are made once: nothing cas does changes them
        "deep-list": lambda: DEEP_LIST, "deep-dict": lambda: DEEP_DICT,
        "deep-200": lambda: DEEP_200, "cyclic": _cyclic, "bigint": lambda: 10 ** 5000,
        "huge-int": lambda: 10 ** 30, "nan": lambda: float("nan"), "inf": lambda: float("inf"),
        "surrogate": lambda: "a\ud800", "u2028": lambda: "a\u2028b", "nul": lambda: "x\x00y",
        "arabic-1": lambda: "\u0661", "superscript-2": lambda: "\u00b2",
        "fullwidth-1": lambda: "\uff11", "long": lambda: "x" * 20_000,
        "bytes-jsonl": lambda: b'{"input": 1}\n', "bytearray": lambda: bytearray(b"[1]"),
        "stream": lambda: io.BytesIO(b'{"input": 1}\n{"input": [1, {"a": null}]}\n'),
        "deep-stream": lambda: io.BytesIO(nested_json(100_000) + b"\n"),
        "text-stream": lambda: io.StringIO('{"input": 2}\n'), "object": object,
        "function": lambda: len, "set": lambda: {1, 2}, "tuple": lambda: (1, "a"),
        "bad-case": lambda: cas.Case(steps=42), "case": lambda: cas.Case(input=1),
        "forged": lambda: EncodedCase("b3:" + "0" * 64, b"{}"),
        "bad-pin": lambda: cas.Pin("evals", "x", 1),
        "deep-pin": lambda: cas.Pin(DEEP_LIST, 1, "b3:"),
        "proof-dict": lambda: {"root": "b3:" + "0" * 64, "case_id": 1, "nodes": [{"a": 1}]},
        "dataset": lambda: "evals", "one": lambda: 1, "case-id": lambda: ctx["case_id"],
        "pin": lambda: ctx["pin"], "pin-text": lambda: str(ctx["pin"]), "run-id": lambda: "r-1",
        "annotation": lambda: ctx["annotation"], "token": lambda: "ct-" + "0" * 32,
        "version-record": lambda: ctx["record"], "case-list": lambda: [{"input": "new"}],
        "id-list": lambda: [ctx["case_id"]], "junk-list": lambda: [[1], None, {"a": b"x"}],
        "subject": lambda: [{"subject_kind": "agent_run", "subject_ref": "r-1",
                             "review_annotation_id": ctx["annotation"]}],
    }


_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                  st.text(max_size=8), st.binary(max_size=8))
JUNK = st.recursive(_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner),
    st.dictionaries(st.one_of(st.text(max_size=4), st.integers()), inner, max_size=3)),
    max_leaves=6)
NAMES = ["deep-list", "deep-dict", "deep-200", "cyclic", "bigint", "huge-int", "nan", "inf",
         "surrogate", "u2028", "nul", "arabic-1", "superscript-2", "fullwidth-1", "long",
         "bytes-jsonl", "bytearray", "stream", "deep-stream", "text-stream", "object",
         "function", "set", "tuple", "bad-case", "case", "forged", "bad-pin", "deep-pin",
         "proof-dict", "dataset", "one", "case-id", "pin", "pin-text", "run-id", "annotation",
         "token", "version-record", "case-list", "id-list", "junk-list", "subject"]
ARG = st.one_of(JUNK, st.sampled_from(NAMES).map(Special))

# Methods not to call: `create` makes a repository on a backend (not an argument a caller
# gets wrong by value), `gc` and `erase` are called with their waits bounded below.
SKIP = {"create"}
METHODS = sorted(name for name, member in inspect.getmembers(cas.Repository)
                 if not name.startswith("_") and callable(member) and name not in SKIP)
FUNCTIONS = ["encode_case", "read_cases_jsonl", "verify_proof", "check_proof", "diff_runs", "format_plan",
             "parse_plan", "plan_digest", "replay_case", "replay_item", "cases", "to_pandas"]


def test_the_fuzzed_surface_is_the_public_surface():
    exported = {n for n in cas.__all__ if callable(getattr(cas, n))
                and not isinstance(getattr(cas, n), type)}
    assert exported == set(FUNCTIONS) | {"find", "init", "open"}  # those three: see below
    assert {"commit", "import_runs", "record_score", "items", "erase"} <= set(METHODS)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A small repository to copy: evals@1 with two cases, a run with a review, a pin."""
    path = tmp_path_factory.mktemp("template")
    env = {"CAS_USER": "Ada <ada@example.com>", "CAS_CONFIG": str(path / "user-config.json")}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        repo = cas.init(str(path / "repo"))
        repo.create_dataset("evals", admission="direct")
        record = repo.commit("evals", base=None, add=[{"input": "a"}, {"input": "b"}])
        repo.import_runs([dict(RUN)])
        preview = repo.add_reviews([{"run_id": "r-1", "metric": "m", "label": "l"}])
        annotation = repo.add_reviews([{"run_id": "r-1", "metric": "m", "label": "l"}],
                                      preview["confirm_token"])["annotation_ids"][0]
        ctx = {"case_id": repo.items("evals", 1).items[0], "pin": repo.pin("evals", 1),
               "annotation": annotation, "record": record}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return path / "repo", ctx


def _call(fn, args, kwargs):
    result = fn(*args, **kwargs)
    if inspect.isgenerator(result):
        for _ in result:
            pass


def _refused_only_with_cas_errors(fn, args, kwargs):
    try:
        _call(fn, args, kwargs)
    except CasError as exc:
        assert exc.code in CODES, exc
        assert isinstance(exc.message, str) and len(exc.message) < 30_000
        json.dumps(exc.to_json())  # its fields are JSON too, for `--json`
    # anything else escapes and fails the test


def _arguments(data, fn, specials):
    """Arguments for every required parameter, and for some of the optional ones."""
    args, kwargs = [], {}
    for p in inspect.signature(fn).parameters.values():
        if p.default is not p.empty and not data.draw(st.booleans(), label=f"give {p.name}"):
            continue
        value = data.draw(ARG, label=p.name)
        if isinstance(value, Special):
            value = specials[value.name]()
        if p.kind in (p.KEYWORD_ONLY,) or p.default is not p.empty:
            kwargs[p.name] = value
        else:
            args.append(value)
    if fn.__name__ in ("gc", "erase"):
        kwargs["wait"] = 0  # never wait for a writer: there is none
    return args, kwargs


FUZZ = settings(max_examples=25, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("method", METHODS)
def test_every_repository_method_raises_only_cas_errors(template, tmp_path, method):
    path, ctx = template
    copy = str(tmp_path / "repo")  # one copy of the repository, shared by every example
    shutil.copytree(path, copy)
    repo = cas.open(copy)
    specials = _specials(ctx)

    @FUZZ
    @given(data=st.data())
    def fuzz(data):
        fn = getattr(repo, method)
        args, kwargs = _arguments(data, fn, specials)
        _refused_only_with_cas_errors(fn, args, kwargs)

    fuzz()
    assert cas.open(copy).fsck().ok  # and nothing it accepted or refused damaged it


@pytest.mark.parametrize("function", FUNCTIONS)
@FUZZ
@given(data=st.data())
def test_every_exported_function_raises_only_cas_errors(template, function, data):
    path, ctx = template
    fn = getattr(cas, function)
    specials = _specials(ctx)
    specials["repo"] = lambda: cas.open(str(path))
    args, kwargs = _arguments(data, fn, specials)
    if function in ("replay_item", "cases", "to_pandas") and \
            data.draw(st.booleans(), label="a real repository"):
        args[0] = cas.open(str(path))
    _refused_only_with_cas_errors(fn, args, kwargs)


@FUZZ
@given(data=st.data())
def test_pin_parse_and_opening_raise_only_cas_errors(tmp_path_factory, data):
    where = tmp_path_factory.mktemp("open")
    value = data.draw(ARG)
    if isinstance(value, Special):
        value = _specials({"case_id": "", "pin": "", "annotation": "", "record": None})[
            value.name]()
    _refused_only_with_cas_errors(cas.Pin.parse, [value], {})
    if isinstance(value, str) and (os.path.isabs(value) or ".." in value or "~" in value
                                   or value.startswith("s3:")):
        return  # a path outside this test's directory (or a bucket) is not ours to create
    old = os.getcwd()
    os.chdir(where)
    try:
        for fn in (cas.find, cas.open, cas.init):
            _refused_only_with_cas_errors(fn, [value], {})
    finally:
        os.chdir(old)


# -- the CLI: every command, bad arguments, no traceback -----------------------------------
COMMANDS = [
    ["fsck"], ["cat"], ["dataset", "create"], ["dataset", "list"], ["dataset", "show"],
    ["dataset", "edit", "evals"], ["dataset", "history"], ["commit", "evals"], ["show"],
    ["items"], ["case"], ["diff"], ["prove"], ["verify-proof"], ["runs", "import"],
    ["runs", "list"], ["runs", "show"], ["review", "add"], ["review", "list"],
    ["settings", "show"], ["settings", "content-policy"], ["promote", "evals"], ["remove"],
    ["seal", "evals"], ["pin"], ["pin-verify"], ["score", "add"], ["score", "list"],
    ["experiment", "create"], ["experiment", "list"], ["version", "delete"], ["retire"],
    ["erase"], ["erasures", "list"], ["gc"], ["replay"], ["config"], ["bogus"],
]
WORDS = ["evals", "evals@1", "1", "-1", "0", "\u00b2", "\u0661", "\uff11", "@1", "evals@",
         "99999999999", "--json", "--limit", "--base", "--before", "--cursor", "--metric",
         "--value", "--item", "--note", "--cause", "contaminated", "--file", "--add", "--plan",
         "--against", "--confirm-token", "--idempotency-key", "--person", "--grace", "--name",
         "--withhold", "--tag", "-m", "-", "r-1", "b3:" + "0" * 64, "ct-" + "0" * 32,
         "deep.json", "deep.jsonl", "bad.json", "nofile", "--", "1e999", "a\u2028b",
         "\udcff", "x" * 300]
# Argument text as a shell could pass it: anything but NUL (which no argv can hold) and the
# lone surrogates other than U+DC80-U+DCFF, which are how Python decodes the undecodable
# bytes of argv.
TEXT = st.text(st.one_of(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]),
                         st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF)), max_size=6)
CLI_ARGS = st.lists(st.one_of(st.sampled_from(WORDS), TEXT), max_size=5)


@pytest.fixture(scope="module")
def cli_repo(tmp_path_factory):
    """A repository the CLI fuzz may change (retire, delete, ...) as it likes."""
    return _cli_repo(tmp_path_factory.mktemp("cli"))


def _cli_repo(path):
    path.mkdir(parents=True, exist_ok=True)
    (path / "deep.json").write_bytes(nested_json(100_000))
    (path / "deep.jsonl").write_bytes(run_line(nested_json(1000)))
    (path / "bad.json").write_bytes(b'{"root": 1, "case_id": [], "nodes": 5}')
    (path / "cases.jsonl").write_text('{"input": 1}\n{"input": 2}\n')
    env = {"CAS_USER": "Ada <ada@example.com>", "CAS_CONFIG": str(path / "cfg.json"),
           "CAS_REPO": str(path)}
    runner = CliRunner(env=env)
    old = os.getcwd()
    os.chdir(path)
    try:
        assert runner.invoke(cli, ["init"]).exit_code == 0
        assert runner.invoke(cli, ["dataset", "create", "evals", "--admission", "direct"]).exit_code == 0
        assert runner.invoke(cli, ["commit", "evals", "--add", "cases.jsonl"]).exit_code == 0
    finally:
        os.chdir(old)
    return path, runner


def _no_traceback(result, as_json: bool) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    assert result.exit_code in {0, 1, *EXIT_CODES.values()}
    if result.exit_code == 0:
        return
    if as_json:
        if result.stderr:  # `cas config KEY` (unset) exits 1 with nothing to say
            error = json.loads(result.stderr)["error"]
            assert error["code"] in CODES and EXIT_CODES[error["code"]] == result.exit_code
    elif result.stderr.startswith("cas: error: "):
        assert result.stderr.count("\n") == 1  # one line
    elif result.stderr:
        assert "Error: " in result.stderr  # click's usage text


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@settings(max_examples=12, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=CLI_ARGS, as_json=st.booleans())
def test_every_command_refuses_bad_arguments_without_a_traceback(cli_repo, command, args,
                                                                 as_json):
    path, runner = cli_repo
    old = os.getcwd()
    os.chdir(path)
    try:
        words = (["--json"] if as_json else []) + command + args
        result = runner.invoke(cli, words, input="")
    finally:
        os.chdir(old)
    _no_traceback(result, as_json or "--json" in words[:words.index("--")]
                  if "--" in words else as_json or "--json" in words)


@pytest.mark.parametrize("args", [
    ["items", "evals", "\u00b2"], ["items", "evals", "\u0661"], ["items", "evals", "\uff11"],
    ["items", "evals@\u00b2"], ["items", "evals", "-1"], ["diff", "evals", "1", "\u00b2"],
    ["case", "evals", "9" * 5000, "b3:" + "0" * 64], ["score", "list", "evals", "\u00b2"],
    ["commit", "evals", "--base", "\uff11"], ["dataset", "show", "evals", "--before", "-1"],
    ["retire", "evals", "\u0661", "--cause", "contaminated", "--note", "n"],
])
def test_a_version_number_is_ascii_digits(cli_repo, args):
    path, runner = cli_repo
    for words in (args, ["--json"] + args):
        result = runner.invoke(cli, words)
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert result.exit_code == 2, result.output
    error = json.loads(result.stderr)["error"]
    assert error["code"] == "INVALID_ARGUMENT" and error["reason"] == "VERSION_REQUIRED"
    assert "is not a version number" in error["message"]


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_deep_files_are_refused_by_every_command_that_reads_json(tmp_path, depth):
    path, runner = _cli_repo(tmp_path / "repo")
    case_id = json.loads(runner.invoke(cli, ["--json", "items", "evals", "1"]).stdout)[
        "items"][0]["id"]
    deep = nested_json(depth)
    files = {
        "runs.jsonl": run_line(deep), "cases.jsonl": b'{"input": ' + deep + b"}\n",
        "subjects.json": b'[{"subject_kind": "agent_run", "subject_ref": "r-1", "x": '
                         + deep + b"}]",
        "plan.json": b'{"tools": ' + deep + b"}",
        "proof.json": b'{"root": "x", "case_id": "y", "nodes": ' + deep + b"}",
        "reviews.jsonl": b'{"run_id": "r-1", "metric": "m", "label": "l", "x": ' + deep + b"}",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    for args, deep_said in (
            (["runs", "import", "runs.jsonl"], True),
            (["commit", "evals", "--base", "1", "--add", "cases.jsonl"], True),
            (["promote", "evals", "--file", "subjects.json", "--idempotency-key", "k"], True),
            (["verify-proof", "proof.json"], True),
            (["replay", "evals", "1", case_id, "--plan", "plan.json"], True),
            (["replay", "evals", "1", case_id, "--against", "cases.jsonl"], True),
            # a typed reader with no free-form field refuses the unknown field first
            (["review", "add", "--file", "reviews.jsonl"], False)):
        old = os.getcwd()
        os.chdir(tmp_path)
        try:
            result = runner.invoke(cli, ["--json"] + args)
        finally:
            os.chdir(old)
        assert result.exception is None or isinstance(result.exception, SystemExit), args
        assert result.exit_code == 2, (args, result.stderr)
        error = json.loads(result.stderr)["error"]
        assert error["code"] == "INVALID_ARGUMENT", args
        if deep_said:
            assert "nested more than 100 levels deep" in error["message"], (args, error)

"""The Repository facade (cas/repo/repository.py): its operations against a simple in-memory
model, the refusals of the Python API, and each method's signature: its operation's, without
the context."""

from __future__ import annotations

import ast
import inspect
import os
import shutil
import tempfile
import textwrap

import msgspec
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import cas
from cas.format import records as objects
from cas.format.keys import version_key
from cas.repo import repository
from cas.storage.backends.local import LocalBackend
from cas.storage.backends.memory import MemoryBackend
from support.sample_cases import case_id, read_all_items

# -- case generation: small dicts, drawn from a small space so re-adds and equal sets happen ---
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-3, 3),
                    st.text(alphabet="ab\u00e9", max_size=2))
case_st = st.fixed_dictionaries(
    {"input": st.integers(0, 30)},
    optional={"output": _scalar,
              "metadata": st.dictionaries(st.sampled_from(["k", "m"]), _scalar, max_size=2)})
NAMES = ["alpha", "b-2", "c.3"]




class RepositoryMachine(RuleBasedStateMachine):
    """Model: dataset name -> list of frozensets of case ids (index i is version i + 1)."""

    def make_backend(self):
        return MemoryBackend()

    def __init__(self):
        super().__init__()
        self.backend = self.make_backend()
        self.repo = cas.Repository.create(self.backend)
        self.model: dict[str, list[frozenset]] = {}
        self.cases: dict[str, dict] = {}      # every case id ever generated -> its dict
        self.root_of: dict[frozenset, str] = {}  # history independence across datasets

    def keys(self):
        return sorted(self.backend.list(""))

    def remember(self, cases):
        for c in cases:
            self.cases[case_id(c)] = c

    # -- rules ---------------------------------------------------------------------------
    @rule(name=st.sampled_from(NAMES), description=st.text(max_size=5))
    def create_dataset(self, name, description, admission="direct"):
        if name in self.model:
            before = self.keys()
            with pytest.raises(cas.AlreadyExists) as info:
                self.repo.create_dataset(name, description=description, admission="direct")
            assert info.value.code == "ALREADY_EXISTS"
            assert self.keys() == before
            return
        record = self.repo.create_dataset(name, description=description, author="t",
                                          admission="direct")
        assert (record.name, record.revision, record.description) == (name, 1, description)
        self.model[name] = []

    @precondition(lambda self: self.model)
    @rule(data=st.data(), adds=st.lists(case_st, max_size=6), use_none=st.booleans())
    def commit(self, data, adds, use_none):
        name = data.draw(st.sampled_from(sorted(self.model)))
        versions = self.model[name]
        head = versions[-1] if versions else frozenset()
        removes = data.draw(st.lists(st.sampled_from(sorted(head)), max_size=4, unique=True)
                            if head else st.just([]))
        self.remember(adds)
        add_ids = {case_id(c) for c in adds}
        base = len(versions)
        arg_base = None if (base == 0 and use_none) else base
        new = (head - set(removes)) | add_ids
        before = self.keys()
        if add_ids & set(removes):
            with pytest.raises(cas.InvalidArgument):
                self.repo.commit(name, base=arg_base, add=adds, remove=removes)
            assert self.keys() == before
            return
        if versions and new == head:
            with pytest.raises(cas.FailedPrecondition) as info:
                self.repo.commit(name, base=arg_base, add=adds, remove=removes)
            assert info.value.reason == "NO_CHANGES"
            assert self.keys() == before
            return
        record = self.repo.commit(name, base=arg_base, add=adds, remove=removes,
                                  message="m", author="tester")
        assert record.dataset == name
        assert record.number == base + 1
        assert record.parent == (base or None)
        assert record.item_count == len(new)
        assert record.added == len(add_ids - head)
        assert record.removed == len(removes)
        assert (record.author, record.message, record.operation) == ("tester", "m", "commit")
        assert self.repo.version(name, base + 1) == record
        versions.append(frozenset(new))
        self.check_root(record)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), start=st.integers(0, 3000), size=st.sampled_from([0, 40, 80, 150, 1100]),
          drop=st.sampled_from([0.0, 0.1, 0.5, 0.97, 1.0]), rnd=st.randoms(use_true_random=False))
    def bulk_commit(self, data, start, size, drop, rnd):
        """Large adds and removes, so sets cross the leaf size and inner nodes split and fold."""
        name = data.draw(st.sampled_from(sorted(self.model)))
        versions = self.model[name]
        head = versions[-1] if versions else frozenset()
        adds = [{"input": f"bulk-{k}"} for k in range(start, start + size)]
        self.remember(adds)
        add_ids = {case_id(c) for c in adds}
        members = sorted(head - add_ids)
        removes = rnd.sample(members, int(len(members) * drop))
        new = (head - set(removes)) | add_ids
        if versions and new == head:
            with pytest.raises(cas.FailedPrecondition):
                self.repo.commit(name, base=len(versions), add=adds, remove=removes)
            return
        record = self.repo.commit(name, base=len(versions), add=adds, remove=removes)
        assert record.number == len(versions) + 1
        assert record.item_count == len(new)
        assert (record.added, record.removed) == (len(add_ids - head), len(removes))
        versions.append(frozenset(new))
        self.check_root(record)

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data(), adds=st.lists(case_st, min_size=1, max_size=3))
    def stale_base_refused(self, data, adds):
        name = data.draw(st.sampled_from(sorted(n for n, v in self.model.items() if v)))
        head = len(self.model[name])
        base = data.draw(st.integers(0, head - 1))
        self.remember(adds)
        before = self.keys()
        with pytest.raises(cas.VersionConflict) as info:
            self.repo.commit(name, base=base, add=adds)
        err = info.value
        assert err.code == "ABORTED" and isinstance(err, cas.Aborted)
        assert (err.dataset, err.base, err.head) == (name, base, head)
        assert self.keys() == before
        assert self.repo.head(name) == head

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data(), adds=st.lists(case_st, min_size=1, max_size=3))
    def stale_base_retried(self, data, adds):
        """With retry=True a stale base is replaced by the head and the change applied there;
        a change that is empty on the head is refused."""
        name = data.draw(st.sampled_from(sorted(n for n, v in self.model.items() if v)))
        versions = self.model[name]
        base = data.draw(st.integers(0, len(versions) - 1))
        self.remember(adds)
        add_ids = {case_id(c) for c in adds}
        new = versions[-1] | add_ids
        if new == versions[-1]:
            with pytest.raises(cas.FailedPrecondition):
                self.repo.commit(name, base=base, add=adds, retry=True)
            return
        record = self.repo.commit(name, base=base, add=adds, retry=True)
        assert (record.number, record.parent) == (len(versions) + 1, len(versions))
        assert record.item_count == len(new)
        versions.append(frozenset(new))
        self.check_root(record)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), adds=st.lists(case_st, max_size=3), stranger=case_st)
    def remove_non_member_refused(self, data, adds, stranger):
        name = data.draw(st.sampled_from(sorted(self.model)))
        versions = self.model[name]
        head = versions[-1] if versions else frozenset()
        sid = case_id(stranger)
        if sid in head:
            return
        add_ids = {case_id(c) for c in adds}
        if sid in add_ids:
            return
        self.remember(adds + [stranger])
        before = self.keys()
        with pytest.raises(cas.NotFound) as info:
            self.repo.commit(name, base=len(versions), add=adds, remove=[sid])
        assert info.value.code == "NOT_FOUND"
        assert sid in info.value.message
        assert self.keys() == before

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data(), limit=st.one_of(st.integers(1, 7), st.integers(60, 400)))
    def read_version(self, data, limit):
        name = data.draw(st.sampled_from(sorted(n for n, v in self.model.items() if v)))
        versions = self.model[name]
        n = data.draw(st.integers(1, len(versions)))
        expected = sorted(versions[n - 1])
        record = self.repo.version(name, n)
        assert record.number == n and record.parent == (n - 1 or None)
        assert record.item_count == len(expected)
        assert read_all_items(self.repo, name, n, limit) == expected
        self.check_root(record)
        # A page from a cursor in the middle starts strictly after it.
        if expected:
            i = data.draw(st.integers(0, len(expected) - 1))
            page = self.repo.items(name, n, after=expected[i], limit=limit)
            assert page.items == expected[i + 1:i + 1 + limit]

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data())
    def diff(self, data):
        name = data.draw(st.sampled_from(sorted(n for n, v in self.model.items() if v)))
        versions = self.model[name]
        a = data.draw(st.integers(1, len(versions)))
        b = data.draw(st.integers(1, len(versions)))
        d = self.repo.diff(name, a, b)
        assert d.added == sorted(versions[b - 1] - versions[a - 1])
        assert d.removed == sorted(versions[a - 1] - versions[b - 1])

    @precondition(lambda self: any(self.model.values()) and self.cases)
    @rule(data=st.data())
    def read_case(self, data):
        name = data.draw(st.sampled_from(sorted(n for n, v in self.model.items() if v)))
        versions = self.model[name]
        n = data.draw(st.integers(1, len(versions)))
        cid = data.draw(st.sampled_from(sorted(self.cases)))
        if cid in versions[n - 1]:
            got = self.repo.case(name, n, cid)
            assert got == msgspec.convert(self.cases[cid], cas.Case)
            assert case_id(msgspec.to_builtins(got)) == cid
        else:
            with pytest.raises(cas.NotFound):
                self.repo.case(name, n, cid)

    @rule()
    def reopen(self):
        # A fresh handle must see exactly the same thing: nothing relies on in-process caches.
        self.repo = cas.Repository(self.backend)

    def check_root(self, record):
        s = self.model[record.dataset][record.number - 1]
        seen = self.root_of.setdefault(s, record.content_digest)
        assert seen == record.content_digest, "the same set sealed with two different roots"

    # -- invariants ----------------------------------------------------------------------
    @invariant()
    def numbers_contiguous(self):
        assert self.repo.datasets() == sorted(self.model)
        for name, versions in self.model.items():
            assert self.repo.refs.version_numbers(name) == list(range(1, len(versions) + 1))
            assert self.repo.head(name) == len(versions)

    def teardown(self):
        report = cas.Repository(self.backend).fsck()
        assert report.ok, report.problems
        assert report.versions == sum(len(v) for v in self.model.values())
        assert report.datasets == len(self.model)


class LocalRepositoryMachine(RepositoryMachine):
    """The same machine on a local directory (real files, link(2), fsync)."""

    def make_backend(self):
        self.tmp = tempfile.mkdtemp(prefix="cas-sm-")
        return LocalBackend(os.path.join(self.tmp, ".cas"))

    def teardown(self):
        try:
            super().teardown()
        finally:
            if hasattr(self, "tmp"):
                shutil.rmtree(self.tmp, ignore_errors=True)


class S3RepositoryMachine(RepositoryMachine):
    """The same machine on SeaweedFS: a fresh prefix for every example."""

    server = None  # set by test_repository_on_s3

    def make_backend(self):
        from cas.storage.backends import remote_backend
        return remote_backend(self.server.url())


_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_repository_on_s3(seaweed, tmp_path, monkeypatch):
    from hypothesis.stateful import run_state_machine_as_test
    monkeypatch.setenv("CAS_CACHE_DIR", str(tmp_path / "cache"))
    S3RepositoryMachine.server = seaweed
    run_state_machine_as_test(S3RepositoryMachine, settings=settings(
        max_examples=8, stateful_step_count=20, **_SETTINGS))


TestRepositoryMemory = RepositoryMachine.TestCase
TestRepositoryMemory.settings = settings(max_examples=100, stateful_step_count=50, **_SETTINGS)
TestRepositoryLocal = LocalRepositoryMachine.TestCase
TestRepositoryLocal.settings = settings(max_examples=25, stateful_step_count=30, **_SETTINGS)


@pytest.fixture
def repo():
    r = cas.Repository.create(MemoryBackend())
    r.create_dataset("ds", description="first", tags=["b", "a"], author="ann", admission="direct")
    return r


@pytest.mark.parametrize("limit", [0, -1, 501, 10**6, True, 1.5, "10", None])
def test_page_limit_is_1_to_500_refused_not_clamped(repo, limit):
    repo.commit("ds", base=None, add=[{"input": i} for i in range(3)])
    for call in (lambda: repo.items("ds", 1, limit=limit),
                 lambda: repo.diff_page("ds", 1, 1, limit=limit)):
        with pytest.raises(cas.InvalidArgument) as info:
            call()
        assert info.value.message == \
            f"limit must be a positive integer from 1 to 500, not {limit!r}"
        assert info.value.fields == {"minimum": 1, "maximum": 500}
    assert cas.MAX_PAGE == 500
    assert len(repo.items("ds", 1, limit=500).items) == 3
    assert repo.items("ds", 1, limit=1).has_more


def test_diff_pages_concatenate_to_the_diff(repo):
    repo.commit("ds", base=None, add=[{"input": i} for i in range(150)])
    old = read_all_items(repo, "ds", 1, 500)
    repo.commit("ds", base=1, add=[{"input": i} for i in range(150, 400)], remove=old[::3])
    full = repo.diff("ds", 1, 2)
    changes = sorted(full.added + full.removed)
    assert len(changes) == 300
    for limit in (1, 7, 100, 299, 300, 500):
        added, removed, cursor, pages = [], [], None, 0
        while True:
            page = repo.diff_page("ds", 1, 2, cursor=cursor, limit=limit)
            pages += 1
            assert isinstance(page, cas.DiffPage)
            assert 0 < len(page.added) + len(page.removed) <= limit
            added += page.added
            removed += page.removed
            if not page.has_more:
                assert page.next_cursor is None
                break
            assert page.next_cursor == max(page.added + page.removed)
            cursor = page.next_cursor
        assert (added, removed) == (full.added, full.removed)
        assert pages == -(-300 // limit)
    assert repo.diff_page("ds", 2, 2) == cas.DiffPage([], [], None)
    assert repo.diff_page("ds", 1, 2, cursor=changes[-1]) == cas.DiffPage([], [], None)
    reverse = repo.diff_page("ds", 2, 1, limit=500)
    assert (reverse.added, reverse.removed) == (full.removed, full.added)
    with pytest.raises(cas.InvalidArgument):
        repo.diff_page("ds", 1, 2, cursor="nonsense")
    with pytest.raises(cas.NotFound):
        repo.diff_page("ds", 1, 3)
    repo.create_dataset("other", admission="direct")
    repo.commit("other", base=None, add=[{"input": 0}])
    cross = repo.diff_page("ds", 2, 1, new_dataset="other", limit=500)
    assert cross == cas.DiffPage(*repo.diff("ds", 2, 1, new_dataset="other"), None)
    mine, theirs = set(read_all_items(repo, "ds", 2, 500)), {case_id({"input": 0})}
    assert (cross.added, cross.removed) == (sorted(theirs - mine), sorted(mine - theirs))


def test_prove_refuses_a_case_the_version_does_not_hold(repo):
    repo.commit("ds", base=None, add=[{"input": 1}, {"input": 2}])
    repo.commit("ds", base=1, remove=[case_id({"input": 1})])
    assert cas.verify_proof(repo.prove("ds", 1, case_id({"input": 1})))
    for missing in (case_id({"input": 1}), case_id({"input": 3})):
        with pytest.raises(cas.NotFound) as info:
            repo.prove("ds", 2, missing)
        assert info.value.message == f"case {missing} is not in ds@2"


@pytest.mark.parametrize("bad", ["b3:xyz", "abc", "B3:" + "g" * 64, ""])
def test_invalid_digest_arguments_refused(repo, bad):
    repo.commit("ds", base=None, add=[{"input": 1}])
    for call in (lambda: repo.case("ds", 1, bad), lambda: repo.items("ds", 1, after=bad),
                 lambda: repo.commit("ds", base=1, remove=[bad]), lambda: repo.object(bad)):
        with pytest.raises(cas.InvalidArgument) as info:
            call()
        assert "'b3:' followed by 64 hex digits" in info.value.message


@pytest.mark.parametrize("kind", ["version", "dataset", "config", "case"])
def test_unknown_record_format_refused(kind):
    backend = MemoryBackend()
    repo = cas.Repository.create(backend)
    repo.create_dataset("ds", admission="direct")
    repo.commit("ds", base=None, add=[{"input": 1}])
    if kind == "version":
        v1 = repo.version("ds", 1)
        rec = msgspec.structs.replace(v1, number=2, parent=1, format=2)
        assert backend.put_if_absent(version_key("ds", 2), objects.format_record_file(rec))
        with pytest.raises(cas.UnsupportedFormat) as info:
            cas.Repository(backend).version("ds", 2)
    elif kind == "dataset":
        rec = msgspec.structs.replace(repo.dataset("ds"), revision=2, format=2)
        assert backend.put_if_absent("datasets/ds/meta/0000000002",
                                     objects.format_record_file(rec))
        with pytest.raises(cas.UnsupportedFormat) as info:
            cas.Repository(backend).dataset("ds")
    elif kind == "config":
        backend = MemoryBackend()
        rec = objects.RepoConfig(repository_id="x", created_at="t", format=2)
        backend.put_if_absent("config", objects.format_record_file(rec))
        with pytest.raises(cas.UnsupportedFormat) as info:
            cas.Repository(backend)
        return
    else:
        weird = cas.Case(input="future", format=2)
        with repo.store.writer() as w:
            digest = w.add(weird)
        with pytest.raises(cas.UnsupportedFormat) as info:
            cas.Repository(backend).object(digest)
    assert info.value.code == "FAILED_PRECONDITION"
    assert info.value.fields["format"] == 2
    assert "format 1" in info.value.message
    # fsck cannot vouch for what it cannot read: an error even for an unreferenced object.
    report = cas.Repository(backend).fsck()
    assert not report.ok
    assert any("format 2" in p.message for p in report.problems if p.severity == "error")


def _methods() -> list[str]:
    return sorted(n for n, v in vars(cas.Repository).items()
                  if inspect.isfunction(v) and not n.startswith("_"))


def _operation(name: str):
    """The operation function a facade method delegates to: the one it calls with the context."""
    method = getattr(cas.Repository, name)
    body = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(method)))).body[0].body
    [call] = [n.value for n in body if isinstance(n, ast.Return)]
    assert ast.unparse(call.args[0]) == "self.context", name
    module, function = ast.unparse(call.func).split(".")
    return getattr(vars(repository)[module], function)


@pytest.mark.parametrize("name", _methods())
def test_each_method_has_its_operations_signature_without_the_context(name):
    method = inspect.signature(getattr(cas.Repository, name))
    assert "ctx" not in method.parameters and list(method.parameters)[0] == "self"
    params = list(method.parameters.values())[1:]
    assert all(p.annotation is not inspect.Parameter.empty for p in params), name
    assert method.return_annotation is not inspect.Signature.empty, name
    operation = inspect.signature(_operation(name))
    assert list(operation.parameters)[0] == "ctx"
    assert params == list(operation.parameters.values())[1:], name
    assert method.return_annotation == operation.return_annotation, name


def test_a_method_shows_its_real_signature_and_a_writer_finishes_an_erasure_first(monkeypatch):
    assert str(inspect.signature(cas.Repository.commit)) == (
        "(self, name: 'str', *, base: 'int | None', add: 'Iterable[Any]' = (), "
        "remove: 'Iterable[str]' = (), message: 'str' = '', author: 'str | None' = None, "
        "operation: 'str' = 'commit', retry: 'bool' = False) -> 'VersionRecord'")
    calls = []
    monkeypatch.setattr(repository._erasure, "recover", lambda ctx: calls.append(ctx))
    repo = cas.Repository.create(MemoryBackend())
    repo.create_dataset("ds", admission="direct")
    repo.commit("ds", base=None, add=[{"input": 1}])
    assert calls == [repo.context, repo.context]
    repo.items("ds", 1)  # a read does not
    assert len(calls) == 2

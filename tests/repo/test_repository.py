"""Repository operations against a simple in-memory model, and the refusals of the Python API."""

from __future__ import annotations

import os
import shutil
import tempfile

import msgspec
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import cas
from cas.format import records as objects
from cas.storage.backends.local import LocalBackend
from cas.storage.backends.memory import MemoryBackend
from cas.storage.refs import version_key

# -- case generation: small dicts, drawn from a small space so re-adds and equal sets happen ---
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-3, 3),
                    st.text(alphabet="ab\u00e9", max_size=2))
case_st = st.fixed_dictionaries(
    {"input": st.integers(0, 30)},
    optional={"output": _scalar,
              "metadata": st.dictionaries(st.sampled_from(["k", "m"]), _scalar, max_size=2)})
NAMES = ["alpha", "b-2", "c.3"]


def case_id(case: dict) -> str:
    return cas.encode_case(case).case_id


def all_items(repo, name, number, limit):
    out, after, pages = [], None, 0
    while True:
        page = repo.items(name, number, after=after, limit=limit)
        assert len(page.items) <= limit
        pages += 1
        out.extend(page.items)
        if page.next_cursor is None:
            break
        assert page.items and page.next_cursor == page.items[-1]
        after = page.next_cursor
        assert pages < 10_000
    return out


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
        record = self.repo.create_dataset(name, description=description, author="t", admission="direct")
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
        assert all_items(self.repo, name, n, limit) == expected
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


# -- plain tests --------------------------------------------------------------------------
@pytest.fixture
def repo():
    r = cas.Repository.create(MemoryBackend())
    r.create_dataset("ds", description="first", tags=["b", "a"], author="ann", admission="direct")
    return r


def test_edit_dataset_keeps_history(repo):
    repo.edit_dataset("ds", description="second", author="bob")
    repo.edit_dataset("ds", tags=["x"], author="cy")
    history = repo.dataset_history("ds")
    assert [(h.revision, h.description, h.tags, h.author) for h in history] == [
        (1, "first", ["a", "b"], "ann"),
        (2, "second", ["a", "b"], "bob"),
        (3, "second", ["x"], "cy"),
    ]
    assert repo.dataset("ds") == history[-1]
    # A fresh handle reads the same history from storage.
    assert cas.Repository(repo.backend).dataset_history("ds") == history
    with pytest.raises(cas.NotFound):
        repo.edit_dataset("nope", description="x")
    with pytest.raises(cas.NotFound):
        repo.dataset_history("nope")


def test_versions_paging_newest_first(repo):
    for i in range(7):
        repo.commit("ds", base=i, add=[{"input": i}])
    page = repo.versions("ds", limit=3)
    assert [v.number for v in page.versions] == [7, 6, 5]
    assert page.next_before == 5
    page = repo.versions("ds", before=page.next_before, limit=3)
    assert [v.number for v in page.versions] == [4, 3, 2]
    assert page.next_before == 2
    page = repo.versions("ds", before=page.next_before, limit=3)
    assert [v.number for v in page.versions] == [1]
    assert page.next_before is None
    # Walking with the default limit gives every version once, newest first.
    seen, before = [], None
    while True:
        page = repo.versions("ds", before=before, limit=2)
        seen += [v.number for v in page.versions]
        if page.next_before is None:
            break
        before = page.next_before
    assert seen == [7, 6, 5, 4, 3, 2, 1]
    assert repo.versions("ds", before=100, limit=2).versions[0].number == 7
    repo.create_dataset("empty", admission="direct")
    assert repo.versions("empty") == cas.VersionsPage([], None)


@pytest.mark.parametrize("name", ["", "Upper", "has space", "-lead", ".lead", "a/b", "a..b",
                                  "x" * 129, 7, None, "caf\u00e9"])
def test_invalid_dataset_name_refused(repo, name):
    for call in (lambda: repo.create_dataset(name, admission="direct"), lambda: repo.dataset(name),
                 lambda: repo.version(name, 1), lambda: repo.items(name, 1)):
        with pytest.raises(cas.InvalidArgument) as info:
            call()
        assert info.value.code == "INVALID_ARGUMENT"
        assert "a-z, 0-9" in info.value.message  # names what is accepted
    assert repo.datasets() == ["ds"]


def test_longest_valid_name_accepted(repo):
    repo.create_dataset("a" * 128, admission="direct")
    assert "a" * 128 in repo.datasets()


@pytest.mark.parametrize("number", [0, -1, 1.0, "1", True, None])
def test_invalid_version_refused(repo, number):
    repo.commit("ds", base=None, add=[{"input": 1}])
    for call in (lambda: repo.version("ds", number), lambda: repo.items("ds", number),
                 lambda: repo.case("ds", number, case_id({"input": 1})),
                 lambda: repo.diff("ds", 1, number)):
        with pytest.raises(cas.InvalidArgument) as info:
            call()
        assert "positive integer" in info.value.message


def test_missing_version_and_dataset_not_found(repo):
    repo.commit("ds", base=None, add=[{"input": 1}])
    with pytest.raises(cas.NotFound):
        repo.version("ds", 2)
    with pytest.raises(cas.NotFound):
        repo.version("other", 1)
    with pytest.raises(cas.NotFound):
        repo.commit("ds", base=5, add=[{"input": 2}])
    with pytest.raises(cas.NotFound):
        repo.commit("other", base=None, add=[{"input": 2}])


@pytest.mark.parametrize("limit", [0, -1, 1.5, "10", None])
def test_invalid_limit_refused(repo, limit):
    repo.commit("ds", base=None, add=[{"input": 1}])
    with pytest.raises(cas.InvalidArgument) as info:
        repo.items("ds", 1, limit=limit)
    assert "positive integer" in info.value.message
    with pytest.raises(cas.InvalidArgument) as info:
        repo.versions("ds", limit=limit)
    assert "positive integer" in info.value.message


@pytest.mark.parametrize("limit", [0, -1, 501, 10**6, True, 1.5, "10", None])
def test_page_limit_is_1_to_500_refused_not_clamped(repo, limit):
    repo.commit("ds", base=None, add=[{"input": i} for i in range(3)])
    for call in (lambda: repo.items("ds", 1, limit=limit),
                 lambda: repo.diff_page("ds", 1, 1, limit=limit)):
        with pytest.raises(cas.InvalidArgument) as info:
            call()
        assert info.value.message == f"limit must be a positive integer from 1 to 500, not {limit!r}"
        assert info.value.fields == {"minimum": 1, "maximum": 500}
    assert cas.MAX_PAGE == 500
    assert len(repo.items("ds", 1, limit=500).items) == 3
    assert repo.items("ds", 1, limit=1).has_more


def test_diff_pages_concatenate_to_the_diff(repo):
    repo.commit("ds", base=None, add=[{"input": i} for i in range(150)])
    old = all_items(repo, "ds", 1, 500)
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
    mine, theirs = set(all_items(repo, "ds", 2, 500)), {case_id({"input": 0})}
    assert (cross.added, cross.removed) == (sorted(theirs - mine), sorted(mine - theirs))


def test_prove_refuses_a_case_the_version_does_not_hold(repo):
    repo.commit("ds", base=None, add=[{"input": 1}, {"input": 2}])
    repo.commit("ds", base=1, remove=[case_id({"input": 1})])
    assert cas.verify_proof(repo.prove("ds", 1, case_id({"input": 1})))
    for missing in (case_id({"input": 1}), case_id({"input": 3})):
        with pytest.raises(cas.NotFound) as info:
            repo.prove("ds", 2, missing)
        assert info.value.message == f"case {missing} is not in ds@2"


@pytest.mark.parametrize("before", [0, -3, "2", 1.5])
def test_invalid_versions_cursor_refused(repo, before):
    repo.commit("ds", base=None, add=[{"input": 1}])
    with pytest.raises(cas.InvalidArgument) as info:
        repo.versions("ds", before=before)
    assert "positive integer" in info.value.message


@pytest.mark.parametrize("bad", ["b3:xyz", "abc", "B3:" + "g" * 64, ""])
def test_invalid_digest_arguments_refused(repo, bad):
    repo.commit("ds", base=None, add=[{"input": 1}])
    for call in (lambda: repo.case("ds", 1, bad), lambda: repo.items("ds", 1, after=bad),
                 lambda: repo.commit("ds", base=1, remove=[bad]), lambda: repo.object(bad)):
        with pytest.raises(cas.InvalidArgument) as info:
            call()
        assert "'b3:' followed by 64 hex digits" in info.value.message


@pytest.mark.parametrize("base", [-1, "1", 1.0])
def test_invalid_base_refused(repo, base):
    with pytest.raises(cas.InvalidArgument):
        repo.commit("ds", base=base, add=[{"input": 1}])
    assert repo.head("ds") == 0


@pytest.mark.parametrize("value, path", [
    (float("nan"), "$.input"),
    ({"x": [1, float("inf")]}, "$.input.x[1]"),
    ({"k": {"deep": [0, {"z": -float("inf")}]}}, "$.input.k.deep[1].z"),
    ({1: "int key"}, "$.input"),
    ({"s": "\ud800"}, "$.input.s"),
])
def test_commit_with_invalid_json_refused_and_nothing_stored(repo, value, path):
    repo.commit("ds", base=None, add=[{"input": "ok"}])
    before = sorted(repo.backend.list(""))
    cases = [{"input": "fine"}, {"input": value}, {"input": "after"}]
    with pytest.raises(cas.InvalidJSONValue) as info:
        repo.commit("ds", base=1, add=cases)
    assert info.value.path == path
    assert path in info.value.message
    assert info.value.code == "INVALID_ARGUMENT"
    assert sorted(repo.backend.list("")) == before
    assert repo.head("ds") == 1
    # The valid cases sent alongside were not stored either.
    with pytest.raises(cas.NotFound):
        repo.object(case_id({"input": "fine"}))


def test_nan_in_steps_names_the_step(repo):
    with pytest.raises(cas.InvalidJSONValue) as info:
        repo.commit("ds", base=None, add=[{"steps": [{}, {}, {}, {"arguments": {"x": float("nan")}}]}])
    assert info.value.path == "$.steps[3].arguments.x"


def test_same_case_is_one_case_id(repo):
    a = {"input": {"q": 1, "r": [1, 2]}, "output": "x"}
    a_reordered = {"output": "x", "input": {"r": [1, 2], "q": 1}}
    cid = case_id(a)
    assert case_id(a_reordered) == cid
    assert cas.encode_case(msgspec.convert(a, cas.Case)).case_id == cid
    v1 = repo.commit("ds", base=None, add=[a, a_reordered, a])
    assert (v1.item_count, v1.added) == (1, 1)
    assert repo.items("ds", 1).items == [cid]
    # Adding it again in a later commit changes nothing about it: same id, still one member.
    v2 = repo.commit("ds", base=1, add=[a_reordered, {"input": "other"}])
    assert (v2.item_count, v2.added) == (2, 1)
    assert cid in repo.items("ds", 2).items
    assert repo.diff("ds", 1, 2) == cas.Diff([case_id({"input": "other"})], [])
    # Alone, it is no change at all.
    with pytest.raises(cas.FailedPrecondition):
        repo.commit("ds", base=2, add=[a])
    # Stored once: exactly two case objects in the whole repository.
    report = repo.fsck()
    assert report.ok
    case_objects = [e for idx in repo.store.indexes()
                    for e in cas.storage.store.packfmt.parse_index(repo.backend.get(idx.key))[1]
                    if e.kind == objects.KIND_CODES["case"]]
    assert len(case_objects) == 2


def test_add_and_remove_same_case_refused(repo):
    repo.commit("ds", base=None, add=[{"input": 1}])
    with pytest.raises(cas.InvalidArgument):
        repo.commit("ds", base=1, add=[{"input": 1}], remove=[case_id({"input": 1})])


def test_remove_everything_then_read(repo):
    repo.commit("ds", base=None, add=[{"input": i} for i in range(100)])
    ids = all_items(repo, "ds", 1, 33)
    assert len(ids) == 100
    v2 = repo.commit("ds", base=1, remove=ids)
    assert (v2.item_count, v2.removed, v2.added) == (0, 100, 0)
    assert repo.items("ds", 2) == cas.ItemsPage([], None)
    assert repo.diff("ds", 2, 1) == cas.Diff(ids, [])
    assert repo.fsck().ok


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


def test_open_missing_repository_not_found(tmp_path):
    with pytest.raises(cas.NotFound) as info:
        cas.open(str(tmp_path))
    assert info.value.code == "NOT_FOUND"
    with pytest.raises(cas.NotFound):
        cas.open(str(tmp_path / "nowhere"))
    assert not (tmp_path / ".cas").exists()


def test_init_twice_already_exists(tmp_path):
    repo = cas.init(str(tmp_path))
    assert (tmp_path / ".cas" / "config").is_file()
    with pytest.raises(cas.AlreadyExists) as info:
        cas.init(str(tmp_path))
    assert info.value.code == "ALREADY_EXISTS"
    # The first repository is untouched and opens (by the dir or by .cas itself).
    assert cas.open(str(tmp_path)).config == repo.config
    assert cas.open(str(tmp_path / ".cas")).config == repo.config
    with pytest.raises(cas.AlreadyExists):
        cas.Repository.create(repo.backend)


def test_open_reads_what_another_handle_wrote(tmp_path):
    a = cas.init(str(tmp_path))
    a.create_dataset("ds", admission="direct")
    b = cas.open(str(tmp_path))
    assert b.store.indexes() == []  # b has listed the (no) packs before a writes one
    a.commit("ds", base=None, add=[{"input": 1}])
    # b listed the packs before a wrote one: it must still find the new objects.
    assert b.items("ds", 1).items == [case_id({"input": 1})]
    assert b.case("ds", 1, case_id({"input": 1})).input == 1


def test_commit_writes_no_unreferenced_objects(repo):
    repo.commit("ds", base=None, add=[{"input": i} for i in range(90)])
    repo.commit("ds", base=1, remove=repo.items("ds", 1, limit=30).items)  # 60 left: folds
    assert repo.fsck().problems == []

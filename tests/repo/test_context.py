"""The repository context (cas/repo/context.py): opening reads the config and writes nothing;
derived state is built once and dropped on demand; what a pending erasure names is refused."""

from __future__ import annotations

import datetime as dt

import pytest

import cas
from cas.format.keys import pending_key
from cas.format.records import ErasurePlan, format_record_file
from cas.repo.context import Context, now
from cas.storage.backends.memory import MemoryBackend


@pytest.fixture
def backend():
    backend = MemoryBackend()
    cas.Repository.create(backend)
    return backend


def test_now_is_utc_with_microseconds():
    stamp = now()
    parsed = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ")
    assert abs(dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - parsed) < \
        dt.timedelta(seconds=5)


def test_a_context_reads_the_config_and_writes_nothing(backend):
    before = {k: backend.get(k) for k in backend.list("")}
    ctx = Context(backend, clock=lambda: "T", time=lambda: 42.0)
    assert ctx.config.repository_id and (ctx.clock(), ctx.time()) == ("T", 42.0)
    assert {k: backend.get(k) for k in backend.list("")} == before


def test_a_location_without_config_is_not_a_repository():
    with pytest.raises(cas.NotFound):
        Context(MemoryBackend())


def test_derived_state_is_built_once_and_forgotten_on_demand(backend):
    ctx = Context(backend)
    built = []

    def build(name):
        built.append(name)
        return [name]
    assert ctx.derived("a", lambda: build("a")) is ctx.derived("a", lambda: build("a"))
    ctx.derived("b", lambda: build("b"))
    ctx.forget("a")
    ctx.derived("a", lambda: build("a"))
    ctx.derived("b", lambda: build("b"))
    assert built == ["a", "b", "a"]
    ctx.forget()
    ctx.derived("b", lambda: build("b"))
    assert built == ["a", "b", "a", "b"]


def test_a_missing_tree_node_is_data_loss(backend):
    ctx = Context(backend)
    with pytest.raises(cas.DataLoss) as info:
        ctx.tree_node("b3:" + "0" * 64)
    assert info.value.reason == "OBJECT_MISSING"


def test_what_a_pending_erasure_names_is_refused_until_it_completes(backend):
    ctx = Context(backend)
    case = "b3:" + "1" * 64
    ctx.refuse_erasing(case, "case x")  # nothing pending
    plan = ErasurePlan(id="e-1", person="p", cases=[case], runs=[], reviews=["ann-1"],
                       author="a", started_at="t")
    backend.put_if_absent(pending_key(plan.id), format_record_file(plan))
    ctx.refuse_erasing(case, "case x")  # read once per context: this one read it before
    fresh = Context(backend)
    assert fresh.erasing() == {case: "e-1", "ann-1": "e-1"}
    with pytest.raises(cas.FailedPrecondition) as info:
        fresh.refuse_erasing(case, "case x")
    assert (info.value.reason, info.value.fields["erasure"]) == ("ERASURE_PENDING", "e-1")
    assert info.value.message.startswith("case x is being erased (erasure e-1 is recorded")
    ctx.forget("erasing")
    with pytest.raises(cas.FailedPrecondition):
        ctx.refuse_erasing(case, "case x")

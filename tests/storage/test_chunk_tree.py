"""The chunked tree (shape 2, docs/format.md 4.2.1) behind the Trie facade: the shape rule
checked node by node and against an independent reference, history independence, reading,
diffs (also across shapes), proofs and forged proofs, and what is emitted; as hypothesis
properties and a stateful model."""

from __future__ import annotations

import contextlib
import json
import random

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cas.digest import digest_of, from_bytes, to_bytes
from cas.errors import FailedPrecondition
from cas.format.records import (TreeBranch, TreeBranchChild, TreeChild, TreeChunk, TreeLeaf,
                                TreeNode, encode_object)
from cas.storage import chunk_tree
from cas.storage.chunk_tree import level_of, level_of_raw
from cas.storage.tree import EMPTY_CHUNK_ROOT, EMPTY_ROOT, Proof, Trie, check_proof, verify_proof

SETTINGS = settings(max_examples=30, deadline=None)


def max_fill() -> int | None:
    """A run between two cuts of the ids' own is also cut after every MAX_FILL ids (or nodes)
    from its start, if the rule has such a bound: the one number taken from the code under
    test (read when used: some tests below make it small, so that small sets hit it)."""
    return getattr(chunk_tree, "MAX_FILL", None)


@contextlib.contextmanager
def small_fill(n: int):
    old = chunk_tree.MAX_FILL
    chunk_tree.MAX_FILL = n
    try:
        yield
    finally:
        chunk_tree.MAX_FILL = old


needs_fill = pytest.mark.skipif(max_fill() is None, reason="the rule bounds no run's length")


# -- an independent reference of the rule (docs/format.md 4.2.1) -------------------------
def ref_level(case_id: str) -> int:
    v = int(case_id[-16:], 16)
    return 12 if v == 0 else ((v & -v).bit_length() - 1) // 5


def _digest(obj: dict) -> str:
    return digest_of(obj["kind"], json.dumps(obj, separators=(",", ":"), sort_keys=True).encode())


def _pieces(items: list, ends) -> list[list]:
    """`items` cut after each one `ends` says, after every MAX_FILL since the last cut, and
    at the end."""
    out, piece, fill = [], [], max_fill()
    for i, item in enumerate(items):
        piece.append(item)
        if ends(item) or i == len(items) - 1 or len(piece) == fill:
            out.append(piece)
            piece = []
    return out


def ref_root(ids) -> str:
    """The root digest of the chunked tree of `ids`, from the rule as written (JSON and levels
    computed here, not by cas)."""
    ids = sorted(set(ids))
    if not ids:
        return _digest({"format": 1, "ids": [], "kind": "tree.chunk"})
    nodes = [(p[-1], _digest({"format": 1, "ids": p, "kind": "tree.chunk"}), len(p))
             for p in _pieces(ids, lambda x: ref_level(x) >= 1)]  # (last, digest, count)
    k = 1
    while len(nodes) > 1:
        above = []
        for piece in _pieces(nodes, lambda n, k=k: ref_level(n[0]) >= k + 1):
            count = sum(c for _, _, c in piece)
            above.append((piece[-1][0], _digest({
                "children": [{"count": c, "last": last, "node": d} for last, d, c in piece],
                "count": count, "format": 1, "kind": "tree.branch", "level": k}), count))
        nodes, k = above, k + 1
    return nodes[0][1]


def size(node) -> int:
    """Ids of a chunk, children of a branch."""
    return len(node.ids) if isinstance(node, TreeChunk) else len(node.children)


def check_shape(load, root: str, expected) -> int:
    """Walk every node below `root` through `load` (so each must be stored) and check the
    rules a reader checks (docs/format.md, "What a reader checks"), the ids against
    `expected`, and the root against the reference. Returns the root's level."""

    def walk(digest: str, want: int | None) -> tuple[list[str], int]:
        node = load(digest)
        assert encode_object(node)[2] == digest
        assert node.format == 1
        assert max_fill() is None or size(node) <= max_fill()
        if isinstance(node, TreeChunk):
            assert want in (None, 0), (digest, want)
            ids = list(node.ids)
            assert ids == sorted(set(ids))
            assert ids or want is None, "an empty chunk below a branch"
            assert all(ref_level(x) == 0 for x in ids[:-1]), ids
            return ids, 0
        assert isinstance(node, TreeBranch), f"{type(node).__name__} in a shape-2 tree"
        k = node.level
        assert k >= 1 and want in (None, k), (digest, k, want)
        assert node.children
        out: list[str] = []
        for i, c in enumerate(node.children):
            sub, _ = walk(c.node, k - 1)
            assert sub and sub[-1] == c.last and len(sub) == c.count, (digest, i)
            assert not out or sub[0] > out[-1]
            if i < len(node.children) - 1:  # it ends at a cut of level k, or is full
                level = ref_level(c.last)
                assert level == k or (level < k and size(load(c.node)) == max_fill()), \
                    (digest, i, level, k)
            out.extend(sub)
        assert node.count == len(out)
        return out, k

    ids, level = walk(root, None)
    top = load(root)
    if isinstance(top, TreeBranch):
        assert len(top.children) >= 2, "a root branch with one child"
    assert ids == sorted(set(expected))
    assert root == ref_root(expected)
    return level


# -- ids -------------------------------------------------------------------------------------
def force_level(raw: bytes, level: int, spread: int) -> str:
    """The id of `raw` with its last 64 bits' lowest 1 bit moved to bit 5*level + spread:
    an id of level exactly `level`."""
    tz = min(5 * level + spread, 63)
    v = int.from_bytes(raw[24:], "big")
    v = (v >> (tz + 1) << (tz + 1)) | (1 << tz)
    return from_bytes(raw[:24] + v.to_bytes(8, "big"))


# None: the level the raw digest has; about 30% of ids get level >= 1, 12% level >= 2
_LEVELS = [None] * 3 + [0] * 11 + [1] * 4 + [2] * 1 + [3] * 1 + [12] * 1


@st.composite
def case_ids(draw) -> str:
    raw = draw(st.binary(min_size=32, max_size=32))
    level = draw(st.sampled_from(_LEVELS))
    if level is None:
        return from_bytes(raw)
    return force_level(raw, level, draw(st.integers(0, 4)))


def seeded_ids(seed: int, n: int, p1: float, p2: float, p3: float) -> list[str]:
    """`n` ids; a share p1 of level >= 1, p2 >= 2, p3 >= 3 (on top of what chance gives)."""
    rnd = random.Random(seed)
    out: set[str] = set()
    while len(out) < n:
        raw, u = rnd.randbytes(32), rnd.random()
        level = 3 if u < p3 else 2 if u < p2 else 1 if u < p1 else None
        out.add(from_bytes(raw) if level is None else force_level(raw, level, rnd.randrange(5)))
    return sorted(out)


RATES = [(0.0, 0.0, 0.0), (0.3, 0.1, 0.03), (0.5, 0.25, 0.1), (0.1, 0.02, 0.005)]


@st.composite
def id_sets(draw, drawn: int = 40, seeded: int = 400) -> list[str]:
    if draw(st.booleans()):
        return sorted(draw(st.lists(case_ids(), unique=True, max_size=drawn)))
    return seeded_ids(draw(st.integers(0, 2**32)), draw(st.integers(0, seeded)),
                      *draw(st.sampled_from(RATES)))


def other_ids(rnd: random.Random, members, n: int = 10) -> list[str]:
    """Non-members: fresh ids (some of high level), near misses of members, the extremes."""
    out = [force_level(rnd.randbytes(32), rnd.choice([0, 0, 1, 2]), rnd.randrange(5))
           for _ in range(n)]
    for x in rnd.sample(sorted(members), min(n, len(members))):
        i = rnd.randrange(3, 67)
        out.append(x[:i] + ("0" if x[i] != "0" else "1") + x[i + 1:])
    out += ["b3:" + "0" * 64, "b3:" + "f" * 64]
    return [x for x in out if x not in set(members)]


# -- a node store ----------------------------------------------------------------------------
class Nodes:
    """An in-memory node store: `emit` stores a node under its digest and records it."""

    def __init__(self):
        self.nodes: dict[str, object] = {}
        self.emits: list[str] = []
        self.loads = 0

    def emit(self, node):
        digest = encode_object(node)[2]
        self.nodes[digest] = node
        self.emits.append(digest)
        return digest

    def load(self, digest):
        self.loads += 1
        return self.nodes[digest]

    def writer(self, shape: int = 2) -> Trie:
        return Trie(self.load, self.emit, shape=shape)

    def reader(self) -> Trie:
        """A Trie that knows only what was emitted."""
        return Trie(self.load)


def reachable(load, root: str) -> set[str]:
    out, todo = set(), [root]
    while todo:
        d = todo.pop()
        out.add(d)
        node = load(d)
        if isinstance(node, (TreeBranch, TreeNode)):
            todo.extend(c.node for c in node.children)
    return out


def check_emits(nodes: Nodes, start: int, root: str) -> list[str]:
    """What one call emitted (nodes.emits[start:]): each node once, each reachable from the
    new root; and every node the root reaches is stored (walked in the store itself, so the
    empty root a Trie knows without loading must have been emitted too)."""
    new = nodes.emits[start:]
    assert len(new) == len(set(new)), "a node emitted twice in one call"
    reach = reachable(nodes.nodes.__getitem__, root)  # KeyError: reachable but not stored
    assert set(new) <= reach, "an unreachable node was emitted"
    return new


def path(load, root: str, x: str) -> list[str]:
    """Digests from the root down to the chunk where `x` is or would be (the first child whose
    last is >= x; the last child past the end)."""
    out, d = [root], root
    node = load(d)
    while isinstance(node, TreeBranch):
        child = next((c for c in node.children if c.last >= x), node.children[-1])
        d = child.node
        out.append(d)
        node = load(d)
    return out


def shape1_root(ids) -> str:
    return Trie(lambda d: pytest.fail("must not load"), shape=1).build(sorted(ids))


# -- levels ----------------------------------------------------------------------------------
@pytest.mark.parametrize("tail,level", [
    ("0000000000000000", 12), ("8000000000000000", 12), ("1000000000000000", 12),
    ("0800000000000000", 11), ("0000000000000001", 0), ("0000000000000010", 0),
    ("0000000000000020", 1), ("00000000000003e0", 1), ("0000000000000400", 2),
    ("ffffffffffff8000", 3), ("fffffffffffffc00", 2), ("1234567890abcdef", 0)])
def test_level_of_documented_examples(tail, level):
    x = "b3:" + "9" * 48 + tail
    assert level_of(x) == level == ref_level(x)
    assert level_of_raw(to_bytes(x)) == level


@settings(max_examples=200, deadline=None)
@given(case_ids())
def test_level_of_matches_the_reference(x):
    assert level_of(x) == ref_level(x) == level_of_raw(to_bytes(x))


# -- building --------------------------------------------------------------------------------
def test_the_empty_tree():
    assert EMPTY_CHUNK_ROOT == encode_object(TreeChunk(ids=[]))[2] == ref_root([])
    assert EMPTY_CHUNK_ROOT != EMPTY_ROOT
    nodes = Nodes()
    trie = nodes.writer()
    assert trie.build([]) == EMPTY_CHUNK_ROOT
    assert EMPTY_CHUNK_ROOT in nodes.nodes  # stored when built
    reader = nodes.reader()
    x = "b3:" + "5" * 64
    assert reader.count(EMPTY_CHUNK_ROOT) == 0
    assert list(reader.iterate(EMPTY_CHUNK_ROOT)) == []
    assert reader.page(EMPTY_CHUNK_ROOT, None, 10) == []
    assert reader.diff(EMPTY_CHUNK_ROOT, EMPTY_CHUNK_ROOT) == ([], [])
    assert reader.diff(EMPTY_CHUNK_ROOT, EMPTY_ROOT) == ([], [])
    assert not reader.contains(EMPTY_CHUNK_ROOT, x)
    assert reader.holding([EMPTY_CHUNK_ROOT, EMPTY_ROOT], [x]) == [False, False]
    assert not verify_proof(reader.prove(EMPTY_CHUNK_ROOT, x))
    # a tree emptied by apply is the empty chunk, stored
    nodes2 = Nodes()
    w2 = nodes2.writer()
    ids = seeded_ids(1, 50, 0.3, 0.1, 0.03)
    assert w2.apply(w2.build(ids), [], ids) == EMPTY_CHUNK_ROOT
    assert EMPTY_CHUNK_ROOT in nodes2.nodes


@SETTINGS
@given(id_sets())
def test_build_follows_the_shape_rule_and_emits_what_it_reaches(ids):
    nodes = Nodes()
    root = nodes.writer().build(ids)
    check_shape(nodes.nodes.__getitem__, root, ids)
    check_emits(nodes, 0, root)
    reader = nodes.reader()
    assert reader.count(root) == len(ids)
    assert list(reader.iterate(root)) == ids
    # from raw digests, and with no emit (all in memory), the same root
    nodes2 = Nodes()
    assert nodes2.writer().build([to_bytes(i) for i in ids]) == root
    check_emits(nodes2, 0, root)
    assert Trie(lambda d: pytest.fail("must not load")).build(ids) == root


def test_chunks_hold_about_32_ids_at_any_size():
    # uniform ids (no forced levels): one in 32 ends a chunk, one node in 32 ends a branch
    for n in (3_000, 20_000):
        ids = seeded_ids(n, n, 0, 0, 0)
        nodes = Nodes()
        root = nodes.writer().build(ids)
        chunks = [nodes.nodes[d] for d in reachable(nodes.nodes.__getitem__, root)
                  if isinstance(nodes.nodes[d], TreeChunk)]
        assert 24 <= n / len(chunks) <= 42, (n, len(chunks))
        assert root == ref_root(ids)


# -- history independence ------------------------------------------------------------------
def batches(rnd: random.Random, items: list[str], noise: list[str]) -> list[tuple]:
    """`items` in random order split into random batches, each with up to 3 ids of `noise`."""
    items = items[:]
    rnd.shuffle(items)
    out, i = [], 0
    while i < len(items):
        n = rnd.choice([1, 2, 5, 40, 1000])
        out.append((sorted(items[i:i + n]), sorted(rnd.sample(noise, min(3, len(noise))))))
        i += n
    return out


@settings(max_examples=40, deadline=None)
@given(id_sets(), st.integers(0, 2**32))
def test_the_root_depends_only_on_the_set(pool, seed):
    _history_independence(pool, seed)


@needs_fill
@settings(max_examples=40, deadline=None)
@given(id_sets(), st.integers(0, 2**32), st.integers(2, 5))
def test_the_root_depends_only_on_the_set_when_runs_are_cut_for_length(pool, seed, fill):
    """The same with MAX_FILL made small: runs cut for length at every level, in small sets."""
    with small_fill(fill):
        _history_independence(pool, seed)


def _history_independence(pool, seed):
    rnd = random.Random(seed)
    final = sorted(x for x in pool if rnd.random() < rnd.choice([0.2, 0.5, 0.9]))
    other = sorted(x for x in pool if rnd.random() < 0.5)
    outside = sorted(set(pool) - set(final))
    want = ref_root(final)
    nodes = Nodes()
    trie = nodes.writer()
    assert trie.build(final) == want

    def run(root, steps, ins_are_items):
        for items, noise in steps:
            start = len(nodes.emits)
            # noise: inserting members (when deleting) or deleting non-members (when inserting)
            root = trie.apply(root, items, noise) if ins_are_items else \
                trie.apply(root, noise, items)
            check_emits(nodes, start, root)
        return root

    # inserted from either empty root (a Trie of shape 2 builds shape 2 from both) ...
    for empty in (EMPTY_CHUNK_ROOT, EMPTY_ROOT) if final else (EMPTY_CHUNK_ROOT,):
        assert run(empty, batches(rnd, final, outside), True) == want
    # ... deleted down from the whole pool, with members inserted as noise ...
    assert run(trie.build(pool), batches(rnd, outside, final), False) == want
    # ... or from another set, batches of inserts and deletes interleaved
    root = trie.build(other)
    steps = [(b, True) for b in batches(rnd, sorted(set(final) - set(other)), outside)] + \
        [(b, False) for b in batches(rnd, sorted(set(other) - set(final)), final)]
    rnd.shuffle(steps)
    for (items, noise), ins in steps:
        root = run(root, [(items, noise)], ins)
    assert root == want
    # one batch doing both, an id both inserted and deleted ending up present
    both = set(rnd.sample(final, min(3, len(final))))
    assert trie.apply(trie.build(other), sorted(set(final) - set(other) | both),
                      sorted(set(other) - set(final) | both)) == want
    # and emptied in random batches: the empty chunk
    assert run(want, batches(rnd, final, []), False) == EMPTY_CHUNK_ROOT
    check_shape(nodes.nodes.__getitem__, want, final)


@SETTINGS
@given(id_sets(), st.integers(0, 2**32))
def test_noops_change_nothing_and_write_nothing(pool, seed):
    rnd = random.Random(seed)
    members = sorted(x for x in pool if rnd.random() < 0.5)
    nodes = Nodes()
    trie = nodes.writer()
    root = trie.build(members)
    before = len(nodes.emits)
    non_members = sorted(set(pool) - set(members) | set(other_ids(rnd, members, 3)))
    assert trie.apply(root, members, non_members) == root
    assert trie.apply(root, [], []) == root
    assert len(nodes.emits) == before
    # nor through a fresh Trie, which knows nothing of what is stored (the empty root aside:
    # every Trie makes it afresh, and writing it again costs nothing)
    assert Trie(nodes.load, nodes.emit).apply(root, members, non_members) == root
    assert len(nodes.emits) == before or (not members and nodes.emits[before:] == [root])


@SETTINGS
@given(id_sets(), st.integers(0, 2**32))
def test_apply_keeps_the_shape_of_a_non_empty_root(pool, seed):
    """A shape-1 tree edited by a shape-2 Trie stays shape 1 (and a shape-1 Trie builds
    shape 1 onto either empty root)."""
    rnd = random.Random(seed)
    a = sorted(x for x in pool if rnd.random() < 0.5)
    b = sorted(x for x in pool if rnd.random() < 0.5)
    nodes = Nodes()
    old = nodes.writer(shape=1).build(a)
    assert old == shape1_root(a)
    start = len(nodes.emits)
    new = nodes.writer().apply(old, sorted(set(b) - set(a)), sorted(set(a) - set(b)))
    check_emits(nodes, start, new)
    if a:
        assert new == shape1_root(b)
    else:
        assert new == ref_root(b)  # an empty base: the Trie's shape
    for empty in (EMPTY_ROOT, EMPTY_CHUNK_ROOT):
        assert nodes.writer(shape=1).apply(empty, b, []) == shape1_root(b)
        assert nodes.writer(shape=2).apply(empty, b, []) == ref_root(b)
    if a:
        # emptied, a shape-1 tree keeps its shape: the shape-1 empty root
        assert nodes.writer().apply(old, [], a) == EMPTY_ROOT


# -- structural sharing and the cost of a change -------------------------------------------
@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from(RATES), st.booleans(), st.integers(0, 3))
def test_one_change_rewrites_one_path(seed, rates, insert, level):
    rnd = random.Random(f"{seed}/change")  # (not `seed`: seeded_ids would draw the same ids)
    ids = seeded_ids(seed, 3000, *rates)
    nodes = Nodes()
    writer = nodes.writer()
    old = writer.build(ids)
    load = nodes.nodes.__getitem__
    old_nodes = reachable(load, old)
    if insert:
        x = force_level(rnd.randbytes(32), level, rnd.randrange(5))
    else:
        of_level = [i for i in ids if ref_level(i) == level]
        x = rnd.choice(of_level or ids)
    height = check_shape(load, old, ids)
    start = len(nodes.emits)
    new = writer.apply(old, [x], []) if insert else writer.apply(old, [], [x])
    final = sorted(set(ids) ^ {x})
    emitted = check_emits(nodes, start, new)
    fresh = reachable(load, new) - old_nodes
    assert set(emitted) == fresh
    height = max(height, check_shape(load, new, final))
    if max_fill() is None:
        # the nodes on the path of x and, where x is a cut (added: splits a node in two;
        # removed: joins two), on the path of the id after it
        after = [i for i in final if i > x][:1]
        assert fresh <= set(path(load, new, x)).union(*(path(load, new, i) for i in after))
        assert len(fresh) <= 2 * (height + 1)
    else:
        # and full nodes after it, up to the next cut of the ids' own, where the change moved
        # the cuts made every MAX_FILL (but, per level, one node at the end of that run)
        assert len([d for d in fresh if size(load(d)) < max_fill()]) <= 3 * (height + 1)


def _paging_and_diff_cost(n: int):
    ids = seeded_ids(7, n, 0, 0, 0)
    nodes = Nodes()
    writer = nodes.writer()
    old = writer.build(ids)
    new_id, gone = seeded_ids(8, 1, 0, 0, 0)[0], ids[n // 3]
    new = writer.apply(old, [new_id], [gone])
    load = nodes.nodes.__getitem__
    height = check_shape(load, old, ids)
    reader = nodes.reader()
    nodes.loads = 0
    assert reader.diff(old, new) == ([new_id], [gone])
    diff_loads = nodes.loads
    nodes.loads = 0
    assert reader.page(old, ids[n // 2], 10) == ids[n // 2 + 1:n // 2 + 11]
    return diff_loads, nodes.loads, height, len(reachable(load, old))


def test_a_diff_or_a_page_reads_few_nodes():
    diff_loads, page_loads, height, total = _paging_and_diff_cost(20_000)
    assert total > 600
    # two changed paths, each read in both trees; a page: a path and a neighbour chunk
    assert diff_loads <= 2 * 2 * (height + 2), (diff_loads, height, total)
    assert page_loads <= 2 * (height + 2), (page_loads, height)


# -- reading: one tree ---------------------------------------------------------------------
@SETTINGS
@given(id_sets(), st.integers(0, 2**32), st.lists(st.integers(1, 50), min_size=1, max_size=5))
def test_reading_matches_the_set(pool, seed, limits):
    rnd = random.Random(seed)
    members = sorted(x for x in pool if rnd.random() < rnd.random())
    nodes = Nodes()
    root = nodes.writer().build(members)
    trie = nodes.reader()
    assert trie.count(root) == len(members)
    others = other_ids(rnd, members) + sorted(set(pool) - set(members))[:20]
    for x in rnd.sample(members, min(40, len(members))):
        assert trie.contains(root, x)
    for x in others:
        assert not trie.contains(root, x)
    got, after, i = [], None, 0
    while True:
        limit = limits[i % len(limits)]
        i += 1
        page = trie.page(root, after, limit)
        got.extend(page)
        if len(page) < limit:
            break
        after = page[-1]
    assert got == members
    assert trie.page(root, None, 0) == [] and trie.page(root, None, -1) == []
    for cursor in others[:10] + rnd.sample(members, min(10, len(members))):
        n = rnd.randrange(1, 60)
        want = [x for x in members if x > cursor]
        assert trie.page(root, cursor, n) == want[:n]
        assert list(trie.iterate(root, cursor)) == want


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from(RATES[:2]), st.integers(2, 6))
def test_holding_reads_each_node_once_over_versions_that_share_them(seed, rates, versions):
    """Versions a few changes apart share nearly all their nodes: `holding` over all of them
    reads each node on the paths of the ids asked about once, and asked again, none."""
    rnd = random.Random(f"{seed}/holding")
    ids = seeded_ids(seed, 2000, *rates)
    nodes = Nodes()
    writer = nodes.writer()
    roots, sets = [writer.build(ids)], [set(ids)]
    for _ in range(versions - 1):
        gone = set(rnd.sample(sorted(sets[-1]), 3))
        new = {force_level(rnd.randbytes(32), rnd.choice([0, 0, 1, 2]), 0) for _ in range(3)}
        roots.append(writer.apply(roots[-1], sorted(new), sorted(gone)))
        sets.append(sets[-1] - gone | new)
    asked = rnd.sample(ids, 3) + other_ids(rnd, [], 2)[:2]
    load = nodes.nodes.__getitem__
    on_paths = {d for r in roots for x in asked for d in path(load, r, x)}
    trie = Trie(nodes.load, load_many=lambda ds: None)
    nodes.loads = 0
    want = [any(x in s for x in asked) for s in sets]
    assert trie.holding(roots, asked) == want
    assert nodes.loads <= len(on_paths), (nodes.loads, len(on_paths))
    nodes.loads = 0
    assert trie.holding(roots[::-1], asked[::-1]) == want[::-1] and nodes.loads == 0


# -- diffs, also across shapes ---------------------------------------------------------------
@SETTINGS
@given(id_sets(), st.integers(0, 2**32))
def test_diff_across_shapes_is_the_set_difference(pool, seed):
    rnd = random.Random(seed)
    a = {x for x in pool if rnd.random() < 0.5}
    if rnd.random() < 0.5:  # a near neighbour
        b = (a - set(rnd.sample(sorted(a), min(len(a), 3)))) | \
            set(rnd.sample(pool, min(len(pool), 3)))
    else:
        b = {x for x in pool if rnd.random() < 0.5}
    nodes = Nodes()
    a1, b1 = nodes.writer(shape=1).build(sorted(a)), nodes.writer(shape=1).build(sorted(b))
    a2, b2 = nodes.writer().build(sorted(a)), nodes.writer().build(sorted(b))
    trie = nodes.reader()
    changes = sorted([(x, True) for x in b - a] + [(x, False) for x in a - b])
    cursors = [None, *other_ids(rnd, pool, 3),
               *(x for x, _ in rnd.sample(changes, min(3, len(changes))))]
    for old, new in ((a1, b2), (a2, b1), (a2, b2), (a1, b1)):
        assert trie.diff(old, new) == (sorted(b - a), sorted(a - b))
        assert trie.diff(new, old) == (sorted(a - b), sorted(b - a))
        for cursor in cursors:
            assert list(trie.iter_diff(old, new, cursor)) == \
                [c for c in changes if cursor is None or c[0] > cursor]
    # the same set in both shapes: different roots, no difference
    assert trie.diff(a1, a2) == ([], []) and trie.diff(b2, b1) == ([], [])
    assert a1 != a2
    for empty in (EMPTY_ROOT, EMPTY_CHUNK_ROOT):
        assert trie.diff(empty, b2) == (sorted(b), [])
        assert trie.diff(a2, empty) == ([], sorted(a))
        assert trie.diff(empty, b1) == (sorted(b), [])


# -- proofs ----------------------------------------------------------------------------------
def tamper(rnd: random.Random, raw: dict, other: str):
    """A changed copy of one proof node (as JSON): never the same value."""
    node = json.loads(json.dumps(raw))
    choices = ["format", "extra", "garbage", "kind"]
    if node["kind"] == "tree.chunk":
        choices += ["add-id", "drop-id", "swap-id"] if node["ids"] else ["add-id"]
    else:
        choices += ["count", "level", "child-count", "child-node", "child-last", "drop-child",
                    "swap-children"]
    what = rnd.choice(choices)
    if what == "format":
        node["format"] = 2
    elif what == "extra":
        node["extra"] = 1
    elif what == "garbage":
        return rnd.choice([None, "x", [], 1, {"kind": "tree.chunk"}, {}])
    elif what == "kind":  # the same fields under the other shape's kind (or no valid kind)
        node["kind"] = {"tree.chunk": "tree.leaf", "tree.branch": "tree.node"}[node["kind"]]
    elif what == "add-id":
        node["ids"] = sorted(set(node["ids"]) | {other})
        if node["ids"] == raw["ids"]:
            node["ids"].append("b3:" + "f" * 64)
    elif what == "drop-id":
        node["ids"].pop(rnd.randrange(len(node["ids"])))
    elif what == "swap-id":
        i = rnd.randrange(len(node["ids"]))
        node["ids"][i] = other if other != node["ids"][i] else "b3:" + "e" * 64
    elif what == "count":
        node["count"] += rnd.choice([-1, 1])
    elif what == "level":
        node["level"] += rnd.choice([-1, 1])
    elif what == "swap-children" and len(node["children"]) > 1:
        node["children"].reverse()
    else:
        c = rnd.choice(node["children"])
        if what == "child-count":
            c["count"] += 1
        elif what == "child-node":
            c["node"] = digest_of("case", b"elsewhere")
        elif what == "child-last":
            c["last"] = other if other != c["last"] else "b3:" + "d" * 64
        else:
            node["children"].remove(c)
    return node


def _builtins(node) -> dict:
    return msgspec.to_builtins(node)


@settings(max_examples=30, deadline=None)
@given(id_sets(), st.integers(0, 2**32))
def test_proofs(pool, seed):
    rnd = random.Random(seed)
    members = sorted(x for x in pool if rnd.random() < 0.6)
    others = other_ids(rnd, members) + sorted(set(pool) - set(members))[:20]
    nodes = Nodes()
    writer = nodes.writer()
    root = writer.build(members)
    extra = force_level(rnd.randbytes(32), rnd.choice([0, 1, 2]), 0)
    other_root = writer.apply(root, [extra], [])
    one_root = nodes.writer(shape=1).build(members)
    trie = nodes.reader()
    load = nodes.nodes.__getitem__
    for x in rnd.sample(members, min(len(members), 25)):
        proof = trie.prove(root, x)
        assert verify_proof(proof) and verify_proof(proof, root=root, case_id=x)
        assert check_proof(proof, root, x) == proof
        # the nodes from the root down to the chunk holding x, following the rule
        assert [_digest(n) for n in proof.nodes] == path(load, root, x)
        assert x in proof.nodes[-1]["ids"] and proof.nodes[-1]["kind"] == "tree.chunk"
        # it survives a JSON round trip
        assert verify_proof(msgspec.json.decode(msgspec.json.encode(proof), type=Proof), root, x)
        # ... but not against another root, nor for another id
        assert not verify_proof(proof, root=other_root)
        assert not verify_proof(Proof(root=other_root, case_id=x, nodes=proof.nodes))
        for y in rnd.sample(others, min(3, len(others))):
            assert not verify_proof(proof, case_id=y)
            assert not verify_proof(Proof(root=root, case_id=y, nodes=proof.nodes))
        # a node changed
        for _ in range(4):
            i = rnd.randrange(len(proof.nodes))
            bad = list(proof.nodes)
            bad[i] = tamper(rnd, proof.nodes[i], rnd.choice(others))
            assert not verify_proof(Proof(root=root, case_id=x, nodes=bad)), (i, bad[i])
        assert not verify_proof(Proof(root=root, case_id=x, nodes=proof.nodes[:-1]))
        assert not verify_proof(Proof(root=root, case_id=x, nodes=proof.nodes + proof.nodes[-1:]))
        if len(proof.nodes) > 1:
            assert not verify_proof(Proof(root=root, case_id=x, nodes=proof.nodes[1:]))
        # a node from another tree holding x: the other tree's path differs somewhere
        other = trie.prove(other_root, x).nodes
        for i in range(min(len(other), len(proof.nodes))):
            if other[i] != proof.nodes[i]:
                bad = list(proof.nodes)
                bad[i] = other[i]
                assert not verify_proof(Proof(root=root, case_id=x, nodes=bad))
        # the shape-1 tree of the same set: its nodes do not prove x under the shape-2 root,
        # nor the other way round
        proof1 = trie.prove(one_root, x)
        assert verify_proof(proof1, one_root, x)
        assert not verify_proof(Proof(root=root, case_id=x, nodes=proof1.nodes))
        assert not verify_proof(Proof(root=one_root, case_id=x, nodes=proof.nodes))
        assert not verify_proof(Proof(root=root, case_id=x, nodes=proof.nodes[:-1] +
                                      proof1.nodes[-1:]))
    for y in others[:20]:
        proof = trie.prove(root, y)
        assert not verify_proof(proof) and not verify_proof(proof, root=root, case_id=y)
        with pytest.raises(FailedPrecondition) as err:
            check_proof(proof)
        assert err.value.reason == "PROOF_INVALID"


def _chain(nodes: list) -> tuple[str, list]:
    """(root, proof nodes) of a hand-made path: each node's child is the next one."""
    return encode_object(nodes[0])[2], [_builtins(n) for n in nodes]


def test_a_path_that_mixes_the_shapes_or_the_levels_is_not_a_proof():
    """Digests all match, but the nodes are not a path of a shape-2 tree (docs/format.md:
    each node below a branch has the branch's level minus 1; a proof whose nodes mix the
    shapes is not valid)."""
    x = force_level(b"\x07" * 32, 1, 0)
    top = "b3:" + "f" * 64
    chunk, leaf = TreeChunk(ids=[x]), TreeLeaf(ids=[x])
    assert ref_level(x) == 1 and encode_object(chunk)[2] != encode_object(leaf)[2]

    def branch(level, child, root=False):
        """A branch over `child` (last x); a root has a second child after it (a root branch
        has two children at least), which the path does not follow."""
        kids = [TreeBranchChild(last=x, node=encode_object(child)[2], count=1)]
        if root:
            kids.append(TreeBranchChild(last=top, node=encode_object(
                TreeChunk(ids=[top]))[2], count=1))
        return TreeBranch(level=level, count=len(kids), children=kids)

    def inner(child):
        return TreeNode(count=1, children=[
            TreeChild(nibble=int(x[3], 16), node=encode_object(child)[2], count=1)])

    # the honest path verifies (the forgeries below differ from it only as they say)
    root, proof_nodes = _chain([branch(1, chunk, root=True), chunk])
    assert verify_proof(Proof(root=root, case_id=x, nodes=proof_nodes))
    b1 = branch(1, chunk)
    for why, forged in (
            ("a shape-1 leaf under a branch", [branch(1, leaf, root=True), leaf]),
            ("a chunk under a shape-1 node", [inner(chunk), chunk]),
            ("a shape-1 node under a branch",
             [branch(1, inner(chunk), root=True), inner(chunk), chunk]),
            ("a chunk under a branch of level 2", [branch(2, chunk, root=True), chunk]),
            ("a branch under a branch of level 1", [branch(1, b1, root=True), b1, chunk]),
            ("level 2 under level 2", [branch(2, branch(2, b1), root=True), branch(2, b1), b1,
                                       chunk]),
            ("level 1 under level 3", [branch(3, b1, root=True), b1, chunk])):
        root, proof_nodes = _chain(forged)
        assert not verify_proof(Proof(root=root, case_id=x, nodes=proof_nodes)), why
        with pytest.raises(FailedPrecondition):
            check_proof(Proof(root=root, case_id=x, nodes=proof_nodes))


def test_a_proof_follows_the_first_child_whose_last_is_not_below_the_id():
    # A hand-made tree holding x in two chunks: the path to x is the one through the first
    # child whose last is >= x; the path to the other chunk (which holds x too) is not a proof.
    a, x, z = ("b3:" + c * 64 for c in "357")
    ca, cz = TreeChunk(ids=[a, x]), TreeChunk(ids=[x, z])
    b = TreeBranch(level=1, count=4, children=[
        TreeBranchChild(last=x, node=encode_object(ca)[2], count=2),
        TreeBranchChild(last=z, node=encode_object(cz)[2], count=2)])
    root = encode_object(b)[2]
    assert verify_proof(Proof(root=root, case_id=x, nodes=[_builtins(b), _builtins(ca)]))
    assert not verify_proof(Proof(root=root, case_id=x, nodes=[_builtins(b), _builtins(cz)]))


# -- a stateful model ------------------------------------------------------------------------
POOLS = st.lists(case_ids(), unique=True, min_size=1, max_size=60)


class ChunkTreeMachine(RuleBasedStateMachine):
    """A set edited by batches through one long-lived writer (and, now and then, a fresh one
    over the same store, as each commit of a repository makes), checked against a model set,
    with every state recorded for diffs, holding and proofs across versions."""

    def __init__(self):
        super().__init__()
        self.nodes = Nodes()
        self.writer = self.nodes.writer()
        self.writer_emitted: set[str] = set()
        self.pool: list[str] = []
        self.model: set[str] = set()
        self.root = EMPTY_CHUNK_ROOT
        self.states: list[tuple[str, frozenset]] = []

    @initialize(pool=POOLS, data=st.data())
    def start(self, pool, data):
        self.pool = sorted(pool)
        self.model = set(data.draw(st.sets(st.sampled_from(self.pool))))
        self.root = self.writer.build(sorted(self.model))
        self.writer_emitted |= set(check_emits(self.nodes, 0, self.root))
        self.states.append((self.root, frozenset(self.model)))

    # -- edits ------------------------------------------------------------------------------
    def _apply(self, ins, dels, fresh=False):
        writer = self.nodes.writer() if fresh else self.writer
        start = len(self.nodes.emits)
        old = self.root
        root = writer.apply(self.root, sorted(set(ins)), sorted(set(dels)))
        before = self.model
        self.model = (self.model - set(dels)) | set(ins)
        new = check_emits(self.nodes, start, root)
        if not fresh:
            assert not set(new) & self.writer_emitted, "the writer emitted a node again"
            self.writer_emitted |= set(new)
        if self.model == before:
            assert root == old, "a no-op changed the root"
            # (the empty root aside: a Trie makes it afresh, and may write it again)
            assert new == [] or (not before and new == [root]), "a no-op wrote"
        self.root = root
        self.states.append((root, frozenset(self.model)))

    def _some(self, data, items):
        items = sorted(items)
        if not items:
            return []
        return data.draw(st.lists(st.sampled_from(items), max_size=8))

    @rule(data=st.data(), fresh=st.booleans())
    def batch(self, data, fresh):
        self._apply(self._some(data, self.pool), self._some(data, self.pool), fresh)

    @rule(data=st.data())
    def noop(self, data):
        self._apply(self._some(data, self.model), self._some(data, set(self.pool) - self.model))

    @rule(new=st.lists(case_ids(), min_size=1, max_size=5), data=st.data())
    def insert_new(self, new, data):
        self.pool = sorted(set(self.pool) | set(new))
        self._apply(new, self._some(data, self.model))

    @precondition(lambda self: self.model)
    @rule()
    def delete_last(self):
        self._apply([], [max(self.model)])

    @precondition(lambda self: any(ref_level(x) >= 1 for x in self.model))
    @rule(data=st.data(), fresh=st.booleans())
    def delete_boundary(self, data, fresh):
        cuts = sorted(x for x in self.model if ref_level(x) >= 1)
        self._apply([], data.draw(st.lists(st.sampled_from(cuts), min_size=1, max_size=3)),
                    fresh)

    @rule(data=st.data())
    def reinsert_boundary(self, data):
        cuts = sorted(x for x in self.pool if ref_level(x) >= 1 and x not in self.model)
        if cuts:
            self._apply([data.draw(st.sampled_from(cuts))], [])

    @precondition(lambda self: self.model)
    @rule()
    def delete_all(self):
        self._apply([], self.model)
        assert self.root == EMPTY_CHUNK_ROOT

    @rule(i=st.integers(0, 10**6))
    def back_to_an_earlier_state(self, i):
        root, s = self.states[i % len(self.states)]
        self._apply(s - self.model, self.model - s)
        assert self.root == root

    # -- reads ------------------------------------------------------------------------------
    def _cursor(self, data):
        choices = [None, "b3:" + "0" * 64, "b3:" + "f" * 64, *self.pool]
        c = data.draw(st.sampled_from(choices))
        if c is not None and data.draw(st.booleans()):  # a near miss
            c = c[:-1] + ("0" if c[-1] != "0" else "1")
        return c

    @rule(data=st.data(), limit=st.integers(-1, 45))
    def page(self, data, limit):
        cursor = self._cursor(data)
        want = [x for x in sorted(self.model) if cursor is None or x > cursor]
        trie = self.nodes.reader()
        assert trie.page(self.root, cursor, limit) == want[:max(limit, 0)]
        assert list(trie.iterate(self.root, cursor)) == want

    @rule(data=st.data())
    def holding(self, data):
        picks = data.draw(st.lists(st.integers(0, len(self.states) - 1), min_size=1,
                                   max_size=4))
        roots = [self.states[i][0] for i in picks]
        sets = [self.states[i][1] for i in picks]
        # the same sets in shape 1 among them, and both empty roots
        s1 = self.states[picks[0]][1]
        roots += [self.nodes.writer(shape=1).build(sorted(s1)), EMPTY_ROOT, EMPTY_CHUNK_ROOT]
        sets += [s1, frozenset(), frozenset()]
        # and the branches below them, as roots of their own (as an earlier version's root
        # is a node of a later, taller tree)
        load = self.nodes.nodes.__getitem__
        below = sorted({c.node for r in roots[:len(picks)] if isinstance(load(r), TreeBranch)
                        for c in load(r).children if isinstance(load(c.node), TreeBranch)})
        for d in data.draw(st.lists(st.sampled_from(below), max_size=3)) if below else []:
            roots.append(d)
            sets.append(frozenset(self.nodes.reader().iterate(d)))
        order = data.draw(st.permutations(range(len(roots))))
        roots, sets = [roots[i] for i in order], [sets[i] for i in order]
        asked = data.draw(st.lists(st.sampled_from(self.pool), max_size=4))
        if data.draw(st.booleans()):
            asked.append(self._cursor(data) or "b3:" + "1" * 64)
        trie = Trie(self.nodes.load, load_many=lambda ds: None)
        want = [any(x in s for x in asked) for s in sets]
        assert trie.holding(roots, asked) == want
        assert trie.holding(roots, asked) == want  # asked again (answers are remembered)

    @rule(data=st.data(), shape1=st.booleans())
    def diff(self, data, shape1):
        i, j = (data.draw(st.integers(0, len(self.states) - 1)) for _ in range(2))
        (ra, a), (rb, b) = self.states[i], self.states[j]
        if shape1:  # the old side as a shape-1 tree
            ra = self.nodes.writer(shape=1).build(sorted(a))
        trie = Trie(self.nodes.load, load_many=lambda ds: None)
        assert trie.diff(ra, rb) == (sorted(b - a), sorted(a - b))
        cursor = self._cursor(data)
        changes = sorted([(x, True) for x in b - a] + [(x, False) for x in a - b])
        assert list(trie.iter_diff(ra, rb, cursor)) == \
            [c for c in changes if cursor is None or c[0] > cursor]

    @rule(data=st.data())
    def proofs(self, data):
        trie = self.nodes.reader()
        for x in self._some(data, self.model)[:3]:
            proof = trie.prove(self.root, x)
            assert verify_proof(proof, self.root, x)
            # valid in an earlier state holding x too, not in one without it
            root, s = self.states[data.draw(st.integers(0, len(self.states) - 1))]
            assert verify_proof(trie.prove(root, x), root, x) == (x in s)
        for y in self._some(data, set(self.pool) - self.model)[:3]:
            assert not verify_proof(trie.prove(self.root, y), self.root, y)

    # -- invariants ---------------------------------------------------------------------------
    @invariant()
    def matches_the_model(self):
        if not self.states:
            return
        model = sorted(self.model)
        check_shape(self.nodes.nodes.__getitem__, self.root, model)  # also: == ref_root
        assert Trie(lambda d: pytest.fail("must not load")).build(model) == self.root
        trie = self.nodes.reader()
        assert trie.count(self.root) == len(model)
        assert list(trie.iterate(self.root)) == model
        for x in self.pool:
            assert trie.contains(self.root, x) == (x in self.model)


TestChunkTreeMachine = ChunkTreeMachine.TestCase
TestChunkTreeMachine.settings = settings(max_examples=50, stateful_step_count=40, deadline=None)


class SmallFillMachine(ChunkTreeMachine):
    """The same model with MAX_FILL made small (2 to 5), so that runs cut for length, and
    the cuts an edit moves along a run, occur at every level of small sets."""

    # (one initialize rule: hypothesis runs several in any order, and the fill must be set
    # before the first tree is built)
    @initialize(fill=st.integers(2, 5), pool=POOLS, data=st.data())
    def start(self, fill, pool, data):
        self._fill = small_fill(fill)
        self._fill.__enter__()
        super().start(pool, data)

    def teardown(self):
        if hasattr(self, "_fill"):
            self._fill.__exit__(None, None, None)


TestSmallFillMachine = needs_fill(SmallFillMachine.TestCase)
TestSmallFillMachine.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)

"""The Merkle trie over case ids: history independence, diff, paging, membership, proofs and
structural sharing, as hypothesis properties over an in-memory node store."""

import json
import random

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cas.digest import digest_of, to_bytes
from cas.format.records import TreeChild, TreeLeaf, TreeNode, encode_object
from cas.storage.tree import EMPTY_ROOT, LEAF_MAX, Proof, Trie, verify_proof

SETTINGS = settings(max_examples=40, deadline=None)
BIG = LEAF_MAX * 16  # sets larger than this always have inner nodes


class Nodes:
    """An in-memory node store: `emit` stores a node under its digest, `load` reads it back."""

    def __init__(self):
        self.nodes = {}
        self.emitted = 0
        self.loads = 0

    def emit(self, node):
        digest = encode_object(node)[2]
        self.nodes[digest] = node
        self.emitted += 1
        return digest

    def load(self, digest):
        self.loads += 1
        return self.nodes[digest]

    def writer(self):
        return Trie(self.load, self.emit)

    def reader(self):
        """A Trie that knows only what was emitted (nothing remembered from building)."""
        return Trie(self.load)


# -- ids ----------------------------------------------------------------------------------
def case_id(data: bytes) -> str:
    return digest_of("case", data)


def uniform_ids(seed: int, n: int) -> list[str]:
    return [case_id(b"%d/%d" % (seed, i)) for i in range(n)]


def prefixed_ids(seed: int, n: int) -> list[str]:
    """Ids sharing long prefixes (a few families), which force deep, narrow tries."""
    rnd = random.Random(seed)
    base = "".join(rnd.choice("0123456789abcdef") for _ in range(64))
    # at most 60 shared digits: at least 16**4 ids per family, so `n` (at most 300) is always
    # reached (with 62, a family has 256 ids and the loop below would never end)
    lengths = [rnd.randrange(1, 61) for _ in range(rnd.randrange(1, 4))]
    out = set()
    while len(out) < n:
        k = rnd.choice(lengths)
        out.add("b3:" + base[:k] + "".join(rnd.choice("0123456789abcdef") for _ in range(64 - k)))
    return list(out)


@st.composite
def id_pools(draw, big=True):
    """A pool of distinct ids to build sets from."""
    kinds = ["bytes", "uniform", "prefixed", "mixed"] + (["big", "big-prefixed"] if big else [])
    kind = draw(st.sampled_from(kinds))
    seed = draw(st.integers(0, 2**32))
    if kind == "bytes":
        pool = [case_id(b) for b in draw(st.lists(st.binary(max_size=6), unique=True,
                                                  max_size=150))]
    elif kind == "uniform":
        pool = uniform_ids(seed, draw(st.integers(0, 300)))
    elif kind == "prefixed":
        pool = prefixed_ids(seed, draw(st.integers(1, 300)))
    elif kind == "mixed":
        pool = uniform_ids(seed, draw(st.integers(0, 100))) + \
            prefixed_ids(seed, draw(st.integers(1, 200)))
    elif kind == "big":
        pool = uniform_ids(seed, draw(st.integers(BIG + 1, BIG + 700)))
    else:
        pool = uniform_ids(seed, draw(st.integers(BIG + 1, BIG + 300))) + \
            prefixed_ids(seed, draw(st.integers(65, 300)))
    return sorted(set(pool))


def subset(rnd: random.Random, pool: list[str], p: float) -> set[str]:
    return {x for x in pool if rnd.random() < p}


def other_ids(rnd: random.Random, pool: list[str], n: int = 30) -> list[str]:
    """Non-members: fresh random ids and near misses that share a member's long prefix."""
    out = [case_id(b"other-%d" % rnd.randrange(2**60)) for _ in range(n)]
    for x in rnd.sample(pool, min(n, len(pool))):
        i = rnd.randrange(3, 67)
        out.append(x[:i] + ("0" if x[i] != "0" else "1") + x[i + 1:])
    return [x for x in out if x not in set(pool)]


# -- an independent reference of the shape rule (docs/format.md 4.2) ----------------------
def ref_root(ids: list[str], depth: int = 0) -> str:
    ids = sorted(ids)
    if len(ids) <= LEAF_MAX:
        text = json.dumps({"format": 1, "ids": ids, "kind": "tree.leaf"}, separators=(",", ":"))
        return digest_of("tree.leaf", text.encode())
    groups = {}
    for x in ids:
        groups.setdefault(x[3 + depth], []).append(x)
    children = [{"count": len(g), "nibble": int(v, 16), "node": ref_root(g, depth + 1)}
                for v, g in sorted(groups.items())]
    text = json.dumps({"children": children, "count": len(ids), "format": 1, "kind": "tree.node"},
                      separators=(",", ":"), sort_keys=True)
    return digest_of("tree.node", text.encode())


def all_nodes(trie: Trie, root: str) -> set[str]:
    out, todo = set(), [root]
    while todo:
        d = todo.pop()
        out.add(d)
        node = trie.node(d)
        if isinstance(node, TreeNode):
            todo.extend(c.node for c in node.children)
    return out


def path(trie: Trie, root: str, x: str) -> list[str]:
    """Digests of the nodes from the root down the path of `x` (to a leaf or a missing child)."""
    out, d, depth = [], root, 0
    while True:
        out.append(d)
        node = trie.node(d)
        if isinstance(node, TreeLeaf):
            return out
        child = next((c for c in node.children if c.nibble == int(x[3 + depth], 16)), None)
        if child is None:
            return out
        d, depth = child.node, depth + 1


def check_well_formed(trie: Trie, root: str, ids: list[str]) -> None:
    """Every node obeys the shape rule, counts are right, and the root is the reference root."""
    assert root == ref_root(ids)
    assert trie.count(root) == len(ids)
    assert list(trie.iterate(root)) == sorted(ids)


# -- building and history independence ----------------------------------------------------
@SETTINGS
@given(id_pools())
def test_build_matches_the_reference_shape_rule(pool):
    nodes = Nodes()
    root = nodes.writer().build(pool)
    check_well_formed(nodes.reader(), root, pool)
    if len(pool) > BIG:
        assert isinstance(nodes.reader().node(root), TreeNode)
    if len(pool) <= LEAF_MAX:
        assert isinstance(nodes.reader().node(root), TreeLeaf)


@SETTINGS
@given(id_pools())
def test_a_build_from_raw_digests_stores_the_same_tree_and_keeps_no_leaf(pool):
    """What an ingest builds (raw digests, leaves emitted as made) is the tree of the ids."""
    nodes = Nodes()
    trie = nodes.writer()
    root = trie.build([to_bytes(i) for i in pool])
    assert root == ref_root(pool)
    check_well_formed(nodes.reader(), root, pool)
    kept = [n for d, n in trie._made.items()
            if isinstance(n, TreeLeaf) and d not in (root, EMPTY_ROOT)]
    assert kept == []  # (a root leaf, and the empty leaf every Trie knows, are kept)
    assert Trie(lambda d: pytest.fail("must not load")).build(
        [to_bytes(i) for i in pool]) == root  # without emit: all in memory


def test_empty_tree():
    nodes = Nodes()
    trie = nodes.writer()
    assert trie.build([]) == EMPTY_ROOT == ref_root([])
    assert trie.count(EMPTY_ROOT) == 0
    assert list(trie.iterate(EMPTY_ROOT)) == []
    assert trie.page(EMPTY_ROOT, None, 10) == []
    assert trie.diff(EMPTY_ROOT, EMPTY_ROOT) == ([], [])
    assert not trie.contains(EMPTY_ROOT, case_id(b"x"))
    assert not verify_proof(trie.prove(EMPTY_ROOT, case_id(b"x")))


@st.composite
def histories(draw):
    pool = draw(id_pools())
    rnd = random.Random(draw(st.integers(0, 2**32)))
    initial = subset(rnd, pool, rnd.random())
    batches = []
    for _ in range(draw(st.integers(0, 6))):
        ins = subset(rnd, pool, rnd.choice([0.0, 0.01, 0.1, 0.5]))
        dels = subset(rnd, pool, rnd.choice([0.0, 0.01, 0.1, 0.5, 0.9]))
        batches.append((sorted(ins), sorted(dels)))
    return pool, initial, batches, rnd


def replay(trie, root, batches, model):
    for ins, dels in batches:
        root = trie.apply(root, ins, dels)
        model = (model - set(dels)) | set(ins)
    return root, model


@settings(max_examples=30, deadline=None)
@given(histories())
def test_root_depends_only_on_the_set(history):
    pool, initial, batches, rnd = history
    nodes = Nodes()
    trie = nodes.writer()
    start = trie.build(sorted(initial))
    root, final = replay(trie, start, batches, set(initial))
    assert root == trie.build(sorted(final))
    check_well_formed(nodes.reader(), root, sorted(final))  # and every node was emitted

    # the same batches in another order (a different set, in general) agree with build too
    shuffled = batches[:]
    rnd.shuffle(shuffled)
    root2, final2 = replay(trie, start, shuffled, set(initial))
    assert root2 == trie.build(sorted(final2)) == ref_root(sorted(final2))

    # other histories reaching `final`: inserted from empty in random chunks ...
    order = sorted(final)
    rnd.shuffle(order)
    r, i = EMPTY_ROOT, 0
    while i < len(order):
        n = rnd.randrange(1, 200)
        r = trie.apply(r, sorted(order[i:i + n]), [])
        i += n
    assert r == root
    # ... or from the whole pool, deleting the rest in random chunks with no-op noise
    extra = sorted(set(pool) - final)
    rnd.shuffle(extra)
    r, i = trie.build(pool), 0
    while i < len(extra):
        n = rnd.randrange(1, 200)
        noise = rnd.sample(sorted(final), min(3, len(final)))  # inserting members: no-op
        r = trie.apply(r, sorted(noise), sorted(extra[i:i + n]))
        i += n
    assert r == root


@SETTINGS
@given(id_pools(), st.integers(0, 2**32))
def test_apply_semantics_and_noops(pool, seed):
    rnd = random.Random(seed)
    members = subset(rnd, pool, 0.5)
    nodes = Nodes()
    trie = nodes.writer()
    root = trie.build(sorted(members))
    before = nodes.emitted
    non_members = sorted(set(pool) - members) + other_ids(rnd, pool, 5)
    # inserting members and deleting non-members changes nothing and writes nothing
    assert trie.apply(root, sorted(members), sorted(set(non_members) - members)) == root
    assert trie.apply(root, [], []) == root
    assert nodes.emitted == before
    # an id both inserted and deleted in one batch ends up present
    both = sorted(rnd.sample(pool, min(5, len(pool))))
    r = trie.apply(root, both, both)
    assert r == trie.build(sorted(members | set(both)))
    # deleting everything gives the empty tree
    assert trie.apply(root, [], sorted(members)) == EMPTY_ROOT


# -- reading ------------------------------------------------------------------------------
@SETTINGS
@given(id_pools(), st.integers(0, 2**32))
def test_contains_matches_membership_and_count_is_right(pool, seed):
    rnd = random.Random(seed)
    members = sorted(subset(rnd, pool, rnd.random()))
    nodes = Nodes()
    root = nodes.writer().build(members)
    trie = nodes.reader()
    assert trie.count(root) == len(members)
    for x in members:
        assert trie.contains(root, x)
    for x in sorted(set(pool) - set(members)) + other_ids(rnd, pool):
        assert not trie.contains(root, x)


@SETTINGS
@given(id_pools(), st.integers(0, 2**32), st.integers(1, 6))
def test_holding_is_membership_of_any_for_each_root(pool, seed, versions):
    """`holding(roots, ids)` answers, for each root, whether its set holds one of `ids`: the
    same as `contains` asked for each id, over versions that share subtrees (each made from
    the last by `apply`), with members, non-members and near misses asked at once; shared
    nodes are loaded once, a level's nodes together."""
    rnd = random.Random(seed)
    nodes = Nodes()
    writer = nodes.writer()
    roots = [writer.build(sorted(subset(rnd, pool, rnd.random())))]
    for _ in range(versions - 1):
        held = [x for x in pool if writer.contains(roots[-1], x)]
        gone = rnd.sample(held, min(len(held), rnd.randrange(0, 5)))
        new = rnd.sample(pool, min(len(pool), rnd.randrange(0, 5)))
        roots.append(writer.apply(roots[-1], sorted(set(new) - set(held)), sorted(gone)))
    roots.append(EMPTY_ROOT)
    asked = rnd.sample(pool, min(len(pool), rnd.randrange(0, 4))) + other_ids(rnd, pool, 3)
    batches = []
    trie = Trie(nodes.load, load_many=batches.append)
    nodes.loads = 0
    got, loads = trie.holding(roots, asked), nodes.loads
    expected = [any(nodes.reader().contains(r, c) for c in asked) for r in roots]
    assert got == expected
    assert loads == len({d for batch in batches for d in batch})  # each node once
    assert all(len(set(batch)) == len(batch) for batch in batches)
    # Asked again about the same ids (in another order), the same trie walks nothing again;
    # about other ids, it answers for those.
    nodes.loads = 0
    assert trie.holding(roots[::-1], asked[::-1]) == expected[::-1] and nodes.loads == 0
    others = other_ids(rnd, pool, 2) + rnd.sample(pool, min(len(pool), 2))
    assert trie.holding(roots, others) == [any(nodes.reader().contains(r, c) for c in others)
                                           for r in roots]


@SETTINGS
@given(id_pools(), st.integers(0, 2**32), st.lists(st.integers(1, 300), min_size=1, max_size=8))
def test_pages_concatenated_equal_the_sorted_set(pool, seed, limits):
    rnd = random.Random(seed)
    members = sorted(subset(rnd, pool, rnd.random()))
    nodes = Nodes()
    root = nodes.writer().build(members)
    trie = nodes.reader()
    got, after, i = [], None, 0
    while True:
        limit = limits[i % len(limits)]
        i += 1
        page = trie.page(root, after, limit)
        assert len(page) <= limit
        got.extend(page)
        if len(page) < limit:
            break
        after = page[-1]
    assert got == members
    assert trie.page(root, None, 0) == []
    assert trie.page(root, None, -1) == []
    # a cursor need not be a member: a page starts strictly after it
    for cursor in other_ids(rnd, pool, 10) + rnd.sample(members, min(10, len(members))):
        n = rnd.randrange(1, 100)
        assert trie.page(root, cursor, n) == [x for x in members if x > cursor][:n]


@settings(max_examples=30, deadline=None)
@given(id_pools(), st.integers(0, 2**32))
def test_diff_equals_set_difference(pool, seed):
    rnd = random.Random(seed)
    a = subset(rnd, pool, rnd.random())
    if rnd.random() < 0.5:  # a near neighbour, sharing most subtrees
        b = (a - set(rnd.sample(sorted(a), min(len(a), rnd.randrange(0, 5))))) | \
            set(rnd.sample(pool, min(len(pool), rnd.randrange(0, 5))))
    else:
        b = subset(rnd, pool, rnd.random())
    nodes = Nodes()
    writer = nodes.writer()
    ra = writer.build(sorted(a))
    rb = writer.apply(ra, sorted(b - a), sorted(a - b))
    trie = nodes.reader()
    assert trie.diff(ra, rb) == (sorted(b - a), sorted(a - b))
    assert trie.diff(rb, ra) == (sorted(a - b), sorted(b - a))
    assert trie.diff(ra, ra) == ([], [])
    assert trie.diff(EMPTY_ROOT, rb) == (sorted(b), [])
    assert trie.diff(ra, EMPTY_ROOT) == ([], sorted(a))


def test_diff_skips_equal_subtrees():
    ids = uniform_ids(5, 20_000)
    nodes = Nodes()
    writer = nodes.writer()
    old = writer.build(sorted(ids))
    new_id, gone = case_id(b"new"), ids[123]
    new = writer.apply(old, [new_id], [gone])
    trie = nodes.reader()
    depth = max(len(path(trie, new, new_id)), len(path(trie, old, gone)))
    total = len(all_nodes(trie, old))
    assert total > 300
    nodes.loads = 0
    assert trie.diff(old, new) == ([new_id], [gone])
    # two paths, each read in both trees (leaves read again to compare their ids)
    assert nodes.loads <= 2 * 2 * (depth + 2), (nodes.loads, depth, total)
    assert trie.diff(old, old) == ([], [])


@settings(max_examples=30, deadline=None)
@given(id_pools(), st.integers(0, 2**32))
def test_iter_diff_is_the_diff_in_id_order_from_any_cursor(pool, seed):
    rnd = random.Random(seed)
    a = subset(rnd, pool, rnd.random())
    b = subset(rnd, pool, rnd.random()) if rnd.random() < 0.5 else \
        (a - set(rnd.sample(sorted(a), min(len(a), 3)))) | set(rnd.sample(pool, min(len(pool), 3)))
    nodes = Nodes()
    writer = nodes.writer()
    ra = writer.build(sorted(a))
    rb = writer.apply(ra, sorted(b - a), sorted(a - b))
    trie = nodes.reader()
    changes = sorted([(x, True) for x in b - a] + [(x, False) for x in a - b])
    for old, new, want in ((ra, rb, changes), (rb, ra, [(x, not k) for x, k in changes]),
                           (EMPTY_ROOT, rb, [(x, True) for x in sorted(b)]),
                           (ra, EMPTY_ROOT, [(x, False) for x in sorted(a)]), (ra, ra, [])):
        assert list(trie.iter_diff(old, new)) == want
        # a cursor need not be a change (or a member): the rest starts strictly after it
        for cursor in other_ids(rnd, pool, 5) + [x for x, _ in rnd.sample(want, min(5, len(want)))]:
            assert list(trie.iter_diff(old, new, cursor)) == [c for c in want if c[0] > cursor]


def test_a_page_of_iter_diff_reads_only_the_paths_to_its_changes():
    ids = uniform_ids(6, 20_000)
    nodes = Nodes()
    writer = nodes.writer()
    old = writer.build(sorted(ids))
    gone = sorted(ids[:200])
    new = writer.apply(old, [], gone)
    trie = nodes.reader()
    depth = max(len(path(trie, old, x)) for x in gone[:4])
    nodes.loads = 0
    changes = trie.iter_diff(old, new, gone[10])
    assert [next(changes) for _ in range(3)] == [(x, False) for x in gone[11:14]]
    assert nodes.loads <= 2 * 4 * (depth + 2), (nodes.loads, depth)


# -- proofs -------------------------------------------------------------------------------
def tamper(rnd: random.Random, raw: dict) -> object:
    """A changed copy of one proof node (as JSON): never the same value."""
    node = json.loads(json.dumps(raw))
    choices = ["format", "extra", "garbage", "kind"]
    if node["kind"] == "tree.leaf":
        choices += ["add-id", "drop-id", "swap-id"] if node["ids"] else ["add-id"]
    else:
        choices += ["count", "child-count", "child-node", "child-nibble", "drop-child"]
    what = rnd.choice(choices)
    if what == "format":
        node["format"] = 2
    elif what == "extra":
        node["extra"] = 1
    elif what == "garbage":
        return rnd.choice([None, "x", [], 1, {"kind": "tree.leaf"}, {}])
    elif what == "kind":
        node["kind"] = "tree.node" if node["kind"] == "tree.leaf" else "tree.leaf"
    elif what == "add-id":
        node["ids"] = sorted(node["ids"] + [case_id(b"intruder-%d" % rnd.randrange(10**9))])
    elif what == "drop-id":
        node["ids"].pop(rnd.randrange(len(node["ids"])))
    elif what == "swap-id":
        node["ids"][rnd.randrange(len(node["ids"]))] = case_id(b"swap-%d" % rnd.randrange(10**9))
    elif what == "count":
        node["count"] += rnd.choice([-1, 1])
    else:
        c = rnd.choice(node["children"])
        if what == "child-count":
            c["count"] += 1
        elif what == "child-node":
            c["node"] = case_id(b"elsewhere")
        elif what == "child-nibble":
            c["nibble"] = (c["nibble"] + 1) % 16
        else:
            node["children"].remove(c)
    return node


@settings(max_examples=30, deadline=None)
@given(id_pools(), st.integers(0, 2**32))
def test_proofs(pool, seed):
    rnd = random.Random(seed)
    members = sorted(subset(rnd, pool, rnd.random()))
    others = other_ids(rnd, pool) + sorted(set(pool) - set(members))[:30]
    nodes = Nodes()
    writer = nodes.writer()
    root = writer.build(members)
    other_root = writer.apply(root, [case_id(b"one more")], [])
    trie = nodes.reader()
    for x in rnd.sample(members, min(len(members), 60)):
        proof = trie.prove(root, x)
        assert verify_proof(proof)
        assert verify_proof(proof, root=root, case_id=x)
        # a proof survives a JSON round trip (it is meant to be written down and checked later)
        assert verify_proof(msgspec.json.decode(msgspec.json.encode(proof), type=Proof), root, x)
        # ... but not against another root, nor for another id
        assert not verify_proof(proof, root=other_root)
        assert not verify_proof(Proof(root=other_root, case_id=x, nodes=proof.nodes))
        for y in others[:3]:
            assert not verify_proof(proof, case_id=y)
            assert not verify_proof(Proof(root=root, case_id=y, nodes=proof.nodes))
        # tampering with any node of the proof breaks it
        for _ in range(3):
            i = rnd.randrange(len(proof.nodes))
            bad = list(proof.nodes)
            bad[i] = tamper(rnd, proof.nodes[i])
            assert not verify_proof(Proof(root=root, case_id=x, nodes=bad))
        assert not verify_proof(Proof(root=root, case_id=x, nodes=proof.nodes[:-1]))
        assert not verify_proof(Proof(root=root, case_id=x, nodes=proof.nodes + proof.nodes[-1:]))
        assert len(proof.nodes) == len(path(trie, root, x))
    for y in others[:30]:
        proof = trie.prove(root, y)
        assert not verify_proof(proof)
        assert not verify_proof(proof, root=root, case_id=y)


def test_proof_with_malformed_fields_is_not_a_proof():
    nodes = Nodes()
    ids = sorted(uniform_ids(1, 200))
    root = nodes.writer().build(ids)
    proof = nodes.reader().prove(root, ids[0])
    assert verify_proof(proof)
    for case in ["not a digest", "B3:" + ids[0][3:].upper(), ids[0] + "0", ""]:
        assert not verify_proof(Proof(root=root, case_id=case, nodes=proof.nodes))
    assert not verify_proof(Proof(root=root, case_id=ids[0], nodes=[]))


def test_a_forged_chain_deeper_than_an_id_is_not_a_proof():
    # A hostile proof may name a root built from nodes no real tree has, here 65 inner nodes
    # on one path: an id has only 64 digits, so this is malformed, and must be refused (not
    # crash the verifier).
    x = case_id(b"target")
    leaf = TreeLeaf(ids=[x])
    digest = encode_object(leaf)[2]
    chain = [leaf]
    for depth in range(64, -1, -1):
        nib = int(x[3 + depth], 16) if depth < 64 else 0
        node = TreeNode(count=1, children=[TreeChild(nibble=nib, node=digest, count=1)])
        digest = encode_object(node)[2]
        chain.append(node)
    chain.reverse()
    proof = Proof(root=digest, case_id=x, nodes=[msgspec.to_builtins(n) for n in chain])
    assert verify_proof(proof) is False


# -- structural sharing --------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32), st.integers(BIG + 1, 4 * BIG), st.booleans())
def test_apply_shares_every_untouched_node(seed, n, insert):
    rnd = random.Random(seed)
    extra = set(prefixed_ids(seed, 200)) if seed % 3 == 0 else set()
    ids = sorted(set(uniform_ids(seed, n)) | extra)
    nodes = Nodes()
    writer = nodes.writer()
    old = writer.build(ids)
    reader = nodes.reader()
    old_nodes = all_nodes(reader, old)
    x = case_id(b"new-%d" % seed) if insert else rnd.choice(ids)
    old_path = path(reader, old, x)
    old_leaf = reader.node(old_path[-1])
    depth = len(old_path) - 1  # depth of the node the change lands in

    before = nodes.emitted
    new = writer.apply(old, [x], []) if insert else writer.apply(old, [], [x])
    emitted = nodes.emitted - before
    new_nodes = all_nodes(reader, new)
    fresh = new_nodes - old_nodes
    assert fresh <= set(nodes.nodes)  # every new node was emitted ...
    assert emitted == len(fresh)  # ... and nothing else: no untouched node, no garbage

    new_path = path(reader, new, x)
    splits = insert and isinstance(old_leaf, TreeLeaf) and len(old_leaf.ids) == LEAF_MAX
    if splits:
        # a full leaf split: the path above it, plus the subtree that replaced it
        assert fresh <= set(new_path[:depth]) | all_nodes(reader, new_path[depth])
    else:
        # the changed nodes are only those on the path from the root to the change: one per
        # level of the tree that holds x (insert) or held it (delete)
        assert emitted <= (len(new_path) if insert else depth + 1)
        assert fresh <= set(new_path)
    assert new == ref_root(sorted(set(ids) ^ {x}))


def test_one_insert_into_a_big_tree_writes_one_path():
    ids = sorted(uniform_ids(9, 50_000))
    nodes = Nodes()
    writer = nodes.writer()
    old = writer.build(ids)
    reader = nodes.reader()
    for i in range(200):
        x = case_id(b"extra-%d" % i)
        p = path(reader, old, x)
        leaf = reader.node(p[-1])
        if isinstance(leaf, TreeLeaf) and len(leaf.ids) < LEAF_MAX:
            break
    before = nodes.emitted
    new = writer.apply(old, [x], [])
    assert nodes.emitted - before == len(p) <= 4
    assert reader.count(new) == 50_001
    assert len(all_nodes(reader, new) - all_nodes(reader, old)) == len(p)


@pytest.mark.parametrize("size", [LEAF_MAX, LEAF_MAX + 1, BIG, BIG + 1])
def test_boundaries_of_the_leaf_rule(size):
    ids = sorted(uniform_ids(size, size))
    nodes = Nodes()
    writer = nodes.writer()
    root = writer.build(ids)
    node = nodes.reader().node(root)
    assert isinstance(node, TreeLeaf) == (size <= LEAF_MAX)
    # growing past the limit splits the leaf, shrinking back folds into one leaf again
    grown = writer.apply(root, [case_id(b"grow")], [])
    assert grown == ref_root(ids + [case_id(b"grow")])
    shrunk = writer.apply(grown, [], [case_id(b"grow")])
    assert shrunk == root
    if size == LEAF_MAX + 1:
        folded = writer.apply(root, [], [ids[0]])
        assert isinstance(nodes.reader().node(folded), TreeLeaf)
        assert folded == ref_root(ids[1:])


def test_a_fold_emits_only_nodes_of_the_new_tree():
    # Rebuilding a child and then folding its parent into one leaf must not store the
    # rebuilt child: it would be an unreferenced object in the repository.
    ids = sorted(uniform_ids(49, 1025))
    nodes = Nodes()
    writer = nodes.writer()
    old = writer.build(ids)
    reader = nodes.reader()
    # find a deletion that shrinks a 65-id inner node to 64 ids (so it folds into a leaf)
    for x in ids:
        p = path(reader, old, x)
        if len(p) >= 3 and reader.count(p[1]) == LEAF_MAX + 1:
            break
    else:
        pytest.fail("no foldable subtree in this set")
    before = nodes.emitted
    new = writer.apply(old, [], [x])
    assert new == ref_root([i for i in ids if i != x])
    assert nodes.emitted - before == len(all_nodes(reader, new) - all_nodes(reader, old))


def test_insert_under_a_missing_child_writes_the_new_leaf_and_the_path():
    # 100 ids sharing 10 digits: a chain of one-child inner nodes down to depth 10
    ids = sorted("b3:" + "7" * 10 + case_id(b"%d" % i)[3:57] for i in range(100))
    nodes = Nodes()
    writer = nodes.writer()
    old = writer.build(ids)
    reader = nodes.reader()
    assert len(path(reader, old, ids[0])) == 12  # 11 inner nodes (depths 0-10) and a leaf
    x = "b3:" + "7" * 5 + "0" + "1" * 58  # leaves the chain at depth 5
    assert len(path(reader, old, x)) == 6  # ends at the depth-5 node: no child for digit 0
    before = nodes.emitted
    new = writer.apply(old, [x], [])
    assert nodes.emitted - before == 7  # depths 0-5 rewritten, plus the new leaf [x]
    assert len(path(reader, new, x)) == 7
    assert new == ref_root(ids + [x])
    assert reader.count(new) == 101 and reader.contains(new, x)


def test_a_node_dropped_by_one_apply_is_stored_when_a_later_apply_uses_it():
    # apply #1 rebuilds a child leaf, then folds its parent (65 -> 64 ids) so that leaf is not
    # reachable and not stored. apply #2 on the same Trie makes the same leaf again, this time
    # reachable: it must be stored, or the new root names a node that is not there.
    ids = sorted(uniform_ids(3, LEAF_MAX + 1))
    a = ids[0]
    b = next(x for x in (case_id(b"b%d" % i) for i in range(100)) if x[3] != a[3])
    nodes = Nodes()
    writer = nodes.writer()
    root = writer.build(ids)
    folded = writer.apply(root, [], [a])
    assert isinstance(nodes.reader().node(folded), TreeLeaf)
    again = writer.apply(root, [b], [a])
    check_well_formed(nodes.reader(), again, sorted(set(ids) - {a} | {b}))
    assert all_nodes(nodes.reader(), again) <= set(nodes.nodes)


def test_the_empty_tree_is_stored_when_built():
    nodes = Nodes()
    writer = nodes.writer()
    assert writer.build([]) == EMPTY_ROOT
    assert EMPTY_ROOT in nodes.nodes
    nodes2 = Nodes()
    w2 = nodes2.writer()
    root = w2.build(sorted(uniform_ids(4, 10)))
    assert w2.apply(root, [], sorted(uniform_ids(4, 10))) == EMPTY_ROOT
    assert EMPTY_ROOT in nodes2.nodes

"""The chunked tree (shape 2): sorted ids cut where the ids themselves say. Pure: no I/O.

Shape rule (docs/format.md 4.2.1): an id's level is the number of trailing zero bits of its last
64 bits, divided by LEVEL_BITS. The sorted ids are cut after every id of level >= 1 into chunks
(level-0 nodes); the nodes of level k - 1 are cut after every node whose last id has level
> k into branches of level k; the first level with one node is the root. So a chunk holds
2^LEVEL_BITS ids on average at any size (the hex trie's leaves hold N / 16^depth), the shape is
a function of the set alone, and a change rewrites the nodes on its path and, where it adds or
removes a cut, their neighbours.

The functions take the `Trie` that serves both shapes (cas.storage.tree): its `node(digest)`
loads a node, `put(node, stream)` keeps (or, building, emits) a new one, `prefetch(digests)`
tells the store of nodes about to be read together.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any, Iterator, NamedTuple

from cas.digest import digest_of, from_bytes
from cas.format.records import TreeBranch, TreeBranchChild, TreeChunk, encode_object

CHUNK_BITS = 5   # an id with this many trailing zero bits ends a chunk: 32 ids on average
BRANCH_BITS = 5  # and each this many more, a branch a level up: 32 children on average
# A run between two cuts longer than this is cut every this many from its start: a walk
# meets nodes in proportion to their size, which would make the node on a path (a diff's,
# a change's) hold twice the average, and a set whose ids avoid cuts one huge node.
MAX_FILL = 64
DIFF_PREFETCH = 64  # differing children a diff reads together when it opens two branches

EMPTY_CHUNK = TreeChunk(ids=[])
EMPTY_CHUNK_ROOT = encode_object(EMPTY_CHUNK)[2]
NODE_TYPES = (TreeChunk, TreeBranch)


class Item(NamedTuple):
    """A node as its parent names it."""
    last: str
    node: str
    count: int


def _level(value: int) -> int:
    """The level of an id whose last 64 bits are `value`."""
    zeros = (value & -value).bit_length() - 1 if value else 64
    return 0 if zeros < CHUNK_BITS else 1 + (zeros - CHUNK_BITS) // BRANCH_BITS


def level_of(case_id: str) -> int:
    """The level of an id given as "b3:" and 64 hex digits."""
    return _level(int(case_id[-16:], 16))


def level_of_raw(raw: bytes) -> int:
    return _level(int.from_bytes(raw[-8:], "big"))


def has(ids: list[str], case_id: str) -> bool:
    """Whether the sorted `ids` hold `case_id`."""
    i = bisect_left(ids, case_id)
    return i < len(ids) and ids[i] == case_id


def level(node: TreeChunk | TreeBranch) -> int:
    return node.level if isinstance(node, TreeBranch) else 0


def count(node: TreeChunk | TreeBranch) -> int:
    return node.count if isinstance(node, TreeBranch) else len(node.ids)


# -- building and editing ---------------------------------------------------------------
def build(trie, raw: list[bytes], stream: bool) -> tuple[str, int]:
    """Root and count of the tree over sorted unique raw digests. With `stream`, each chunk is
    emitted as it is made and not kept (a root chunk is kept)."""
    if not raw:
        return trie.put(EMPTY_CHUNK)
    # Only an id whose last byte has its low LEVEL_BITS bits clear can end a chunk: found at C
    # speed, the level of the others is never computed.
    low = (1 << CHUNK_BITS) - 1  # (CHUNK_BITS <= 8)
    ends = [i + 1 for i, r in enumerate(raw) if not r[-1] & low]
    if not ends or ends[-1] != len(raw):
        ends.append(len(raw))
    whole = len(raw) <= MAX_FILL and len(ends) == 1
    items, start = [], 0
    for end in ends:
        while start < end:
            stop = min(end, start + MAX_FILL)
            ids = [from_bytes(r) for r in raw[start:stop]]
            digest, n = trie.put(TreeChunk(ids=ids), stream and not whole)
            items.append(Item(ids[-1], digest, n))
            start = stop
    return _root(trie, items, 0)


def _chunks(trie, ids: list[str]) -> list[Item]:
    """The chunks over sorted `ids`, a run that starts after a cut and ends at one (or at the
    set's end)."""
    items, start = [], 0
    for i, case_id in enumerate(ids):
        if i == len(ids) - 1 or i + 1 - start == MAX_FILL or level_of(case_id) > 0:
            digest, n = trie.put(TreeChunk(ids=ids[start:i + 1]))
            items.append(Item(case_id, digest, n))
            start = i + 1
    return items


def _group(trie, items: list[Item], at: int) -> list[Item]:
    """The branches of level `at` over `items`, the nodes of level `at` - 1 of a run that
    starts after a cut of level `at` and ends at one (or at the set's end)."""
    out, start = [], 0
    for i, item in enumerate(items):
        if i == len(items) - 1 or i + 1 - start == MAX_FILL or level_of(item.last) > at:
            kids = items[start:i + 1]
            digest, n = trie.put(TreeBranch(
                level=at, count=sum(k.count for k in kids),
                children=[TreeBranchChild(last=k.last, node=k.node, count=k.count)
                          for k in kids]))
            out.append(Item(item.last, digest, n))
            start = i + 1
    return out


def _root(trie, items: list[Item], at: int) -> tuple[str, int]:
    """The root over the nodes `items` of level `at` (the whole set's): levels are added while
    a level has more than one node; a branch with one child is never a root."""
    while len(items) > 1:
        at += 1
        items = _group(trie, items, at)
    if not items:
        return trie.put(EMPTY_CHUNK)
    digest, n = items[0].node, items[0].count
    node = trie.node(digest)
    while isinstance(node, TreeBranch) and len(node.children) == 1:
        digest = node.children[0].node
        node = trie.node(digest)
    return digest, n


def apply(trie, root: str, ins: list[str], dels: list[str]) -> tuple[str, int]:
    """Root and count of (set(root) - dels) | ins (both sorted), rewriting only the runs of
    nodes a change reaches: each level reads the children of the nodes changed at the level
    above, rebuilds the runs of them a change falls in, and cuts the run again."""
    node = trie.node(root)
    last = node.children[-1].last if isinstance(node, TreeBranch) else node.ids[-1]
    top = Item(last, root, count(node))
    return _root(trie, _rebuild(trie, [top], level(node), ins, dels), level(node))


def _rebuild(trie, items: list[Item], at: int, ins: list[str], dels: list[str]) -> list[Item]:
    """The nodes of level `at` that replace `items` (a run of them that starts where a node of
    level `at` + 1 starts or a deleted last id left off) once `ins` and `dels` are applied;
    every change is at most the run's last id, but at the set's end."""
    if at == 0:
        ids = [i for item in items for i in trie.node(item.node).ids]
        new = sorted(set(ids).difference(dels).union(ins))
        return items if new == ids else _chunks(trie, new)
    kids = [Item(c.last, c.node, c.count) for item in items for c in trie.node(item.node).children]
    lasts = [k.last for k in kids]
    n = len(kids)
    ins_at: dict[int, list[str]] = {}
    dels_at: dict[int, list[str]] = {}
    for x in ins:  # (an id past every last is at the set's end: the last child takes it)
        ins_at.setdefault(min(bisect_left(lasts, x), n - 1), []).append(x)
    for x in dels:
        i = bisect_left(lasts, x)
        if i < n:  # (past every last: not a member)
            dels_at.setdefault(i, []).append(x)
    touched = [i in ins_at or i in dels_at for i in range(n)]
    # A run rebuilt starts after a child the ids cut after and ends at one (a cut every
    # MAX_FILL counts from the last such), and a child whose last id goes has lost its end.
    cut = [level_of(last) >= at for last in lasts]
    for i in range(n - 1):
        if touched[i] and (not cut[i] or lasts[i] in dels_at.get(i, ())):
            touched[i + 1] = True
    for i in range(n - 1, 0, -1):
        if touched[i] and not cut[i - 1]:
            touched[i - 1] = True
    out: list[Item] = []
    i = 0
    while i < n:
        if not touched[i]:
            out.append(kids[i])
            i += 1
            continue
        j = i
        while j + 1 < n and touched[j + 1]:
            j += 1
        run = range(i, j + 1)
        out += _rebuild(trie, kids[i:j + 1], at - 1,
                        [x for k in run for x in ins_at.get(k, ())],
                        [x for k in run for x in dels_at.get(k, ())])
        i = j + 1
    return items if out == kids else _group(trie, out, at)


# -- reading ----------------------------------------------------------------------------
def _lasts(node: TreeBranch) -> list[str]:
    return [c.last for c in node.children]


def contains(trie, root: str, case_id: str) -> bool:
    node = trie.node(root)
    while isinstance(node, TreeBranch):
        i = bisect_left(_lasts(node), case_id)
        if i == len(node.children):
            return False
        node = trie.node(node.children[i].node)
    return has(node.ids, case_id)


def holding(trie, roots: list[str], ids: list[str], held: dict) -> None:
    """Fill `held[(digest, -1)]` (whether a node holds one of `ids`, sorted) for `roots` and
    the nodes on their paths, a level at a time, each node once: which of `ids` a node holds
    does not depend on the parent it is reached from, and any parent hands it all of those."""
    inner: list[tuple[tuple[str, int], list[tuple[str, int]]]] = []
    level_now = {(root, -1): ids for root in roots if (root, -1) not in held}
    seen = set(level_now)  # (a root may be a node under a taller root too)
    while level_now:
        trie.prefetch([d for d, _ in level_now])
        below: dict[tuple[str, int], list[str]] = {}
        for key, reaching in level_now.items():
            node = trie.node(key[0])
            if isinstance(node, TreeChunk):
                held[key] = any(has(node.ids, c) for c in reaching)
                continue
            lasts = _lasts(node)
            groups: dict[tuple[str, int], list[str]] = {}
            for c in reaching:
                i = bisect_left(lasts, c)
                if i < len(lasts):
                    groups.setdefault((node.children[i].node, -1), []).append(c)
            inner.append((key, list(groups)))
            for kid, group in groups.items():
                if kid not in held and kid not in seen:
                    seen.add(kid)
                    below[kid] = group
        level_now = below
    for key, kids in reversed(inner):  # a level's children are decided before it
        held[key] = any(held[k] for k in kids)


def iterate(trie, digest: str, after: str | None) -> Iterator[str]:
    node = trie.node(digest)
    if isinstance(node, TreeChunk):
        yield from node.ids[bisect_right(node.ids, after) if after is not None else 0:]
        return
    first = bisect_right(_lasts(node), after) if after is not None else 0
    for k, c in enumerate(node.children[first:]):
        yield from iterate(trie, c.node, after if k == 0 else None)


def page(trie, digest: str, after: str | None, limit: int, out: list[str]) -> None:
    node = trie.node(digest)
    if isinstance(node, TreeChunk):
        start = bisect_right(node.ids, after) if after is not None else 0
        out.extend(node.ids[start:start + limit - len(out)])
        return
    kids = _after_kids(node, after)
    if after is not None and node.level > 1 and kids:
        # The child the cursor falls in may hold all the page or none of it: it is read
        # first, and its siblings only as the page still needs them. (Chunks are small and
        # lie together: those of a page are read at once, the cursor's included.)
        page(trie, kids[0].node, after, limit, out)
        kids = kids[1:]
    wanted, room = [], limit - len(out)
    for k, c in enumerate(kids):
        if room <= 0:
            break
        wanted.append(c)
        if k or after is None or node.level > 1:
            room -= c.count
    if len(wanted) > 1:
        trie.prefetch([c.node for c in wanted])
    for k, c in enumerate(wanted):
        if len(out) >= limit:
            return
        page(trie, c.node, after if k == 0 and node.level == 1 else None, limit, out)


def iter_diff(trie, old: str, new: str, after: str | None) -> Iterator[tuple[str, bool]]:
    """(id, added) from `old` to `new` in id order, strictly after `after`. Each side is a
    stack of what is left of it, nodes and ids, in order: two equal nodes at the top are
    passed over unread; otherwise the higher node (or both) is opened. The cuts are the ids',
    so past a change both sides meet again at the next node they share."""
    if old != new and trie.batches:
        _prefetch_diff(trie, old, new, after)
    known = {old: trie.node(old), new: trie.node(new)}  # (read once: opened next)
    a: list[Any] = [(old, level(known[old]))]
    b: list[Any] = [(new, level(known[new]))]
    while a and b:
        x, y = a[-1], b[-1]
        if isinstance(x, str) and isinstance(y, str):
            if x == y:
                a.pop()
                b.pop()
            elif x < y:
                yield a.pop(), False
            else:
                yield b.pop(), True
            continue
        if not isinstance(x, str) and not isinstance(y, str):
            if x[0] == y[0]:
                a.pop()
                b.pop()
                continue
            if x[1] != y[1]:
                _open(trie, a if x[1] > y[1] else b, after, known)
                continue
            a.pop()
            b.pop()
            na, nb = _read(trie, x[0], known), _read(trie, y[0], known)
            if isinstance(na, TreeChunk):
                ia, ib = _after(na.ids, after), _after(nb.ids, after)
                if ia and ib and ia[-1] == ib[-1]:  # one range on both sides: diffed here
                    yield from merge_diff(iter(ia), iter(ib))
                else:
                    a.extend(reversed(ia))
                    b.extend(reversed(ib))
                continue
            # A child both hold is one subtree, at one place: what lies between two such is
            # one range on both sides, so they are dropped, and only what differs is read.
            ka, kb = _after_kids(na, after), _after_kids(nb, after)
            common = {c.node for c in ka}.intersection(c.node for c in kb)
            ka = [c.node for c in ka if c.node not in common]
            kb = [c.node for c in kb if c.node not in common]
            a.extend((d, x[1] - 1) for d in reversed(ka))
            b.extend((d, x[1] - 1) for d in reversed(kb))
            if 1 < len(ka) + len(kb) <= DIFF_PREFETCH:
                trie.prefetch(ka + kb)
            continue
        _open(trie, a if not isinstance(x, str) else b, after, known)
    for side, added in ((a, False), (b, True)):
        while side:
            x = side.pop()
            if isinstance(x, str):
                yield x, added
            else:
                for case_id in iterate(trie, x[0], after):
                    yield case_id, added


def _prefetch_diff(trie, old: str, new: str, after: str | None) -> None:
    """Read the nodes of a small diff's changed paths a level at a time, both sides in one
    batch, instead of one read per node down each path: each step opens the higher side's
    nodes (both, at one level) and keeps the children the other side has not. Stops where a
    level has more than DIFF_PREFETCH of them (a page of a large diff may need few)."""
    sides = [[old], [new]]
    while True:
        trie.prefetch(sides[0] + sides[1])
        nodes = [[trie.node(d) for d in side] for side in sides]
        levels = [max((level(n) for n in side), default=-1) for side in nodes]
        top = max(levels)
        if top <= 0:
            return
        kids = [{c.node for n in side for c in _after_kids(n, after)}
                if at == top else set(digests)
                for side, at, digests in zip(nodes, levels, sides)]
        sides = [sorted(kids[0] - kids[1]), sorted(kids[1] - kids[0])]
        if len(sides[0]) + len(sides[1]) > DIFF_PREFETCH:
            return


def _after(ids: list[str], after: str | None) -> list[str]:
    return ids[bisect_right(ids, after):] if after is not None else ids


def _after_kids(node: TreeBranch, after: str | None) -> list[TreeBranchChild]:
    """The children of `node` that hold ids after `after`."""
    return node.children[bisect_right(_lasts(node), after):] if after is not None else \
        node.children


def _read(trie, digest: str, known: dict):
    node = known.pop(digest, None)
    return trie.node(digest) if node is None else node


def _open(trie, stack: list, after: str | None, known: dict) -> None:
    """Replace the node on top of `stack` by its children (or ids), the first on top, skipping
    what is at or before `after` (`known`: nodes already read)."""
    digest, at = stack.pop()
    node = _read(trie, digest, known)
    if isinstance(node, TreeChunk):
        stack.extend(reversed(_after(node.ids, after)))
    else:
        stack.extend((c.node, at - 1) for c in reversed(_after_kids(node, after)))


def merge_diff(ia: Iterator[str], ib: Iterator[str]) -> Iterator[tuple[str, bool]]:
    """The changes between two sorted id streams, as (id, added)."""
    x, y = next(ia, None), next(ib, None)
    while x is not None or y is not None:
        if y is None or (x is not None and x < y):
            yield x, False
            x = next(ia, None)
        elif x is None or y < x:
            yield y, True
            y = next(ib, None)
        else:
            x, y = next(ia, None), next(ib, None)


def prove(trie, root: str, case_id: str) -> list:
    """The nodes from `root` down towards `case_id`."""
    nodes, digest = [], root
    while True:
        node = trie.node(digest)
        nodes.append(node)
        if isinstance(node, TreeChunk):
            return nodes
        i = bisect_left(_lasts(node), case_id)
        if i == len(node.children):
            return nodes
        digest = node.children[i].node


def verify(nodes: list, root: str, case_id: str, encode) -> bool:
    """Whether `nodes` (decoded, of either shape) are a path from `root` to a chunk holding
    `case_id`: each hashes to the digest its parent names, and levels fall one a step."""
    expected, at = root, None
    for i, node in enumerate(nodes):
        if not isinstance(node, NODE_TYPES) or node.format != 1:
            return False
        kind = "tree.chunk" if isinstance(node, TreeChunk) else "tree.branch"
        if digest_of(kind, encode(node)) != expected:
            return False
        if at is not None and level(node) != at - 1:
            return False
        if isinstance(node, TreeChunk):
            return i == len(nodes) - 1 and has(node.ids, case_id)
        at = node.level
        j = bisect_left(_lasts(node), case_id)
        if j == len(node.children):
            return False
        expected = node.children[j].node
    return False

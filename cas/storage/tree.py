"""The Merkle tree over case ids: a history-independent hex trie with subtree counts. Pure: no I/O.

Shape rule (docs/format.md): the node for a set S of ids sharing a prefix of d hex digits is a
leaf holding S sorted when |S| <= LEAF_MAX, and otherwise an inner node with one child per
non-empty group of S by its next hex digit. The shape is a function of the set alone, so the
root digest is too, however the set was built.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any, Callable, Iterator, Union

import msgspec

from cas.digest import digest_of, from_bytes, is_digest, parse_digest, to_bytes
from cas.errors import CasError, FailedPrecondition, InvalidArgument
from cas.format import encoding
from cas.format.records import TreeChild, TreeLeaf, TreeNode, encode_object

LEAF_MAX = 64
DIFF_PREFETCH = 64  # changed node pairs at one level that a diff reads ahead together
_OFFSET = 3  # len("b3:"): digit d of an id is id[_OFFSET + d]

Node = Union[TreeLeaf, TreeNode]
EMPTY_LEAF = TreeLeaf(ids=[])
EMPTY_ROOT = encode_object(EMPTY_LEAF)[2]


def nibble(case_id: str, depth: int) -> int:
    return int(case_id[_OFFSET + depth], 16)


class Trie:
    """Operations over stored nodes. `load(digest)` returns a node; `emit(node)` stores one
    (and returns its digest); `load_many(digests)`, when given, is told of nodes about to be
    loaded together (so a store can read them in one go). Nodes this Trie emitted are
    remembered so a batch can read them back before they are flushed."""

    def __init__(self, load: Callable[[str], Node], emit: Callable[[Node], Any] | None = None,
                 load_many: Callable[[list[str]], Any] | None = None):
        self._load = load
        self._emit = emit
        self._load_many = load_many
        self._made: dict[str, Node] = {EMPTY_ROOT: EMPTY_LEAF}
        self._emitted: set[str] = set()
        self._streaming = False  # build(): leaves are emitted as made, not kept
        # holding(): the ids last asked about and, per (node, depth), whether it holds one
        self._holding: tuple[tuple[str, ...], dict[tuple[str, int], bool]] = ((), {})

    def node(self, digest: str) -> Node:
        made = self._made.get(digest)
        return made if made is not None else self._load(digest)

    def _put(self, node: Node) -> tuple[str, int]:
        digest = encode_object(node)[2]
        self._made.setdefault(digest, node)
        count = len(node.ids) if isinstance(node, TreeLeaf) else node.count
        return digest, count

    def _emit_reachable(self, root: str) -> None:
        """Emit the nodes this Trie made, not yet emitted, that the new root reaches, and only
        those: a subtree rebuilt and then folded into a leaf must not be stored as garbage.
        A node made but unreachable in one call may be reachable after a later one, so what
        was emitted is tracked, not what was made in this call."""
        if self._emit is None:
            return
        stack = [root]
        while stack:
            digest = stack.pop()
            node = self._made.get(digest)
            if node is None or digest in self._emitted:
                continue  # a loaded (already stored) node, or already emitted
            self._emitted.add(digest)
            self._emit(node)
            if isinstance(node, TreeNode):
                stack.extend(c.node for c in node.children)

    def count(self, root: str) -> int:
        node = self.node(root)
        return len(node.ids) if isinstance(node, TreeLeaf) else node.count

    # -- building and editing -------------------------------------------------------------
    def build(self, ids: list[str] | list[bytes]) -> str:
        """Root of the tree holding `ids` (sorted, unique): case ids, or their raw digests
        (what an ingest of a million cases holds: a third of the memory of the strings).

        With `emit`, each leaf is emitted as it is made and not kept (a million ids would
        otherwise stay in memory as strings until the Trie goes): read the new tree back
        only once the emitted nodes are stored."""
        raw = [to_bytes(i) for i in ids] if ids and isinstance(ids[0], str) else ids
        self._streaming = self._emit is not None
        try:
            root = self._build(raw, 0, len(raw), 0)[0]
        finally:
            self._streaming = False
        self._emit_reachable(root)
        return root

    def _build(self, ids: list[bytes], lo: int, hi: int, depth: int) -> tuple[str, int]:
        """The subtree over raw digests ids[lo:hi], which share their first `depth` digits."""
        if hi - lo <= LEAF_MAX:
            leaf = TreeLeaf(ids=[from_bytes(r) for r in ids[lo:hi]])
            if not self._streaming or hi - lo == len(ids):  # (a root leaf is kept)
                return self._put(leaf)
            digest = encode_object(leaf)[2]
            if digest not in self._emitted:
                self._emitted.add(digest)
                self._emit(leaf)
            return digest, hi - lo
        children = []
        at, low = depth >> 1, depth & 1  # digit `depth` is a half of byte `at`
        first = ids[lo]
        start = lo
        while start < hi:
            byte = ids[start][at]
            digit = byte & 15 if low else byte >> 4
            if digit == 15:
                end = hi
            else:  # the smallest digest whose digit `depth` is the next one up
                bound = first[:at] + bytes([(byte & 0xF0) | (digit + 1) if low
                                            else (digit + 1) << 4])
                end = bisect_left(ids, bound, start, hi)
            digest, count = self._build(ids, start, end, depth + 1)
            children.append(TreeChild(nibble=digit, node=digest, count=count))
            start = end
        return self._put(TreeNode(count=hi - lo, children=children))

    def apply(self, root: str, inserts: list[str], deletes: list[str]) -> str:
        """Root of (set(root) - deletes) | inserts, rebuilding only the touched paths.

        `inserts` and `deletes` are sorted; inserting a member or deleting a non-member is a
        no-op. Cost: O((inserts + deletes) x depth) nodes, plus at most LEAF_MAX ids gathered
        where a shrinking subtree folds back into a leaf.
        """
        new_root = self._apply(root, 0, inserts, deletes)[0]
        self._emit_reachable(new_root)
        return new_root

    def _apply(self, digest: str, depth: int, ins: list[str], dels: list[str]) -> tuple[str, int]:
        node = self.node(digest)
        if isinstance(node, TreeLeaf):
            members = set(node.ids)
            new = (members - set(dels)) | set(ins)
            if new == members:
                return digest, len(node.ids)
            ids = sorted(map(to_bytes, new))
            return self._build(ids, 0, len(ids), depth)
        children = {c.nibble: c for c in node.children}
        changed = False
        for v, ins_v, dels_v in _group(ins, dels, depth):
            old = children.get(v)
            old_digest = old.node if old is not None else EMPTY_ROOT
            new_digest, new_count = self._apply(old_digest, depth + 1, ins_v, dels_v)
            if new_digest == old_digest:
                continue
            changed = True
            if new_count:
                children[v] = TreeChild(nibble=v, node=new_digest, count=new_count)
            else:
                del children[v]
        if not changed:
            return digest, node.count
        kids = [children[v] for v in sorted(children)]
        total = sum(c.count for c in kids)
        if total <= LEAF_MAX:
            ids = [i for c in kids for i in self.iterate(c.node)]
            return self._put(TreeLeaf(ids=ids))
        return self._put(TreeNode(count=total, children=kids))

    # -- reading --------------------------------------------------------------------------
    def contains(self, root: str, case_id: str) -> bool:
        node, depth = self.node(root), 0
        while isinstance(node, TreeNode):
            v = nibble(case_id, depth)
            child = next((c for c in node.children if c.nibble == v), None)
            if child is None:
                return False
            node, depth = self.node(child.node), depth + 1
        return _has(node.ids, case_id)

    def holding(self, roots: list[str], case_ids: list[str]) -> list[bool]:
        """For each of `roots`, whether its set holds any of `case_ids`. All the roots are
        walked together, a level at a time: a subtree they share (the versions of a dataset
        share nearly all of theirs) is visited once, only along the paths of `case_ids`, and
        the nodes a level needs are loaded together. Asked again about the same ids (an
        erasure asks up to five times), nodes are not walked again: what a node holds never
        changes under its digest."""
        ids = sorted(set(case_ids))
        if self._holding[0] != tuple(ids):
            self._holding = (tuple(ids), {})
        held = self._holding[1]  # (node, depth) -> holds one of ids
        inner: list[tuple[tuple[str, int], list[tuple[str, int]]]] = []
        # A node at a depth has one prefix, so the ids that reach it are the same whichever
        # parent it is reached from: each (node, depth) is visited once.
        level = {(root, 0): ids for root in roots if (root, 0) not in held}
        while level:
            if self._load_many is not None:
                self._load_many([d for d, _ in level if d not in self._made])
            below: dict[tuple[str, int], list[str]] = {}
            for (digest, depth), reaching in level.items():
                node = self.node(digest)
                if isinstance(node, TreeLeaf):
                    held[(digest, depth)] = any(_has(node.ids, c) for c in reaching)
                    continue
                children = {c.nibble: c.node for c in node.children}
                groups: dict[tuple[str, int], list[str]] = {}
                for c in reaching:
                    child = children.get(nibble(c, depth))
                    if child is not None:
                        groups.setdefault((child, depth + 1), []).append(c)
                inner.append(((digest, depth), list(groups)))
                for key, group in groups.items():
                    if key not in held:
                        below.setdefault(key, group)
            level = below
        for key, kids in reversed(inner):  # a level's children are decided before it
            held[key] = any(held[k] for k in kids)
        return [held[(root, 0)] for root in roots]

    def iterate(self, root: str, after: str | None = None) -> Iterator[str]:
        """Ids in ascending order, starting strictly after `after` when given."""
        return self._iter(root, 0, after)

    def _iter(self, digest: str, depth: int, after: str | None) -> Iterator[str]:
        node = self.node(digest)
        if isinstance(node, TreeLeaf):
            start = bisect_right(node.ids, after) if after is not None else 0
            yield from node.ids[start:]
            return
        a = nibble(after, depth) if after is not None else -1
        for c in node.children:
            if c.nibble > a:
                yield from self._iter(c.node, depth + 1, None)
            elif c.nibble == a:
                yield from self._iter(c.node, depth + 1, after)

    def page(self, root: str, after: str | None, limit: int) -> list[str]:
        """Up to `limit` ids in ascending order, strictly after `after`. The subtree counts
        say which children a page needs: those of one node are loaded together."""
        out: list[str] = []
        if limit > 0:
            self._page(root, 0, after, limit, out)
        return out

    def _page(self, digest: str, depth: int, after: str | None, limit: int,
              out: list[str]) -> None:
        node = self.node(digest)
        if isinstance(node, TreeLeaf):
            start = bisect_right(node.ids, after) if after is not None else 0
            out.extend(node.ids[start:start + limit - len(out)])
            return
        first = nibble(after, depth) if after is not None else -1
        wanted, room = [], limit - len(out)
        for c in node.children:
            if c.nibble < first:
                continue
            wanted.append(c)
            if c.nibble > first:  # (the child `after` falls in may hold none after it)
                room -= c.count
            if room <= 0:
                break
        if self._load_many is not None and len(wanted) > 1:
            self._load_many([c.node for c in wanted if c.node not in self._made])
        for c in wanted:
            if len(out) >= limit:
                return
            self._page(c.node, depth + 1, after if c.nibble == first else None, limit, out)

    def diff(self, old: str, new: str) -> tuple[list[str], list[str]]:
        """(added, removed): ids only in `new`, ids only in `old`, each sorted. Equal subtrees
        are skipped without being read."""
        added: list[str] = []
        removed: list[str] = []
        for case_id, is_added in self.iter_diff(old, new):
            (added if is_added else removed).append(case_id)
        return added, removed

    def iter_diff(self, old: str, new: str,
                  after: str | None = None) -> Iterator[tuple[str, bool]]:
        """The changes from `old` to `new` as (id, added) in ascending id order, starting
        strictly after `after` when given. Equal subtrees and subtrees wholly at or before
        `after` are skipped without being read. The changed paths are read ahead a level at a
        time while a level has at most DIFF_PREFETCH changed pairs; below that, lazily, so a
        page of k changes of a large diff reads little more than the paths to those changes."""
        if self._load_many is not None:
            self._prefetch_diff(old, new, after)
        return self._iter_diff(old, new, 0, after)

    def _prefetch_diff(self, old: str, new: str, after: str | None) -> None:
        """Read the nodes of a small diff's changed paths a level at a time, both sides in
        one batch, instead of one read per node down each path. A diff whose changed pairs
        at a level outnumber DIFF_PREFETCH is left to the lazy walk from there (a page of it
        may need few of them)."""
        level, depth = [(old, new, after)], 0
        while level:
            self._load_many([d for pair in level for d in pair[:2] if d not in self._made])
            below = []
            for a, b, at in level:
                na, nb = self.node(a), self.node(b)
                if not (isinstance(na, TreeNode) and isinstance(nb, TreeNode)):
                    continue
                first = nibble(at, depth) if at is not None else -1
                below.extend((x, y, at if v == first else None)
                             for v, x, y in _changed(na, nb, first))
            if len(below) > DIFF_PREFETCH:
                return
            level, depth = below, depth + 1

    def _iter_diff(self, a: str, b: str, depth: int,
                   after: str | None) -> Iterator[tuple[str, bool]]:
        if a == b:
            return
        na, nb = self.node(a), self.node(b)
        if isinstance(na, TreeNode) and isinstance(nb, TreeNode):
            first = nibble(after, depth) if after is not None else -1
            for v, x, y in _changed(na, nb, first):
                yield from self._iter_diff(x, y, depth + 1, after if v == first else None)
            return
        # A leaf on either side: merge the two sorted id streams. The leaf side holds at most
        # LEAF_MAX ids, so at most that many common ids are passed over.
        ia, ib = self._iter(a, depth, after), self._iter(b, depth, after)
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

    def prove(self, root: str, case_id: str) -> "Proof":
        """The nodes from `root` down the path of `case_id`: enough to check membership
        against the root digest alone."""
        nodes = []
        digest, depth = root, 0
        while True:
            node = self.node(digest)
            nodes.append(encoding.to_builtins(node))
            if isinstance(node, TreeLeaf):
                break
            v = nibble(case_id, depth)
            child = next((c for c in node.children if c.nibble == v), None)
            if child is None:
                break
            digest, depth = child.node, depth + 1
        return Proof(root=root, case_id=case_id, nodes=nodes)


def _has(ids: list[str], case_id: str) -> bool:
    i = bisect_left(ids, case_id)
    return i < len(ids) and ids[i] == case_id


def _changed(a: TreeNode, b: TreeNode, first: int) -> list[tuple[int, str, str]]:
    """(digit, child of a, child of b) for each digit from `first` on whose children differ
    between two inner nodes (a missing child is the empty leaf)."""
    ca = {c.nibble: c.node for c in a.children}
    cb = {c.nibble: c.node for c in b.children}
    out = []
    for v in sorted(ca.keys() | cb.keys()):
        if v >= first:
            x, y = ca.get(v, EMPTY_ROOT), cb.get(v, EMPTY_ROOT)
            if x != y:
                out.append((v, x, y))
    return out


def _group(ins: list[str], dels: list[str], depth: int) -> Iterator[tuple[int, list, list]]:
    by: dict[int, tuple[list, list]] = {}
    pos = _OFFSET + depth
    for i in ins:
        by.setdefault(int(i[pos], 16), ([], []))[0].append(i)
    for d in dels:
        by.setdefault(int(d[pos], 16), ([], []))[1].append(d)
    for v in sorted(by):
        yield v, by[v][0], by[v][1]


class Proof(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A membership proof: the path of nodes (as JSON objects) from `root` towards `case_id`."""

    root: str
    case_id: str
    nodes: list[Any]


_NODE_TYPES = Union[TreeLeaf, TreeNode]
_PROOF_DECODER = msgspec.json.Decoder(Proof)


def parse_proof(data: Any, source: str = "proof") -> Proof:
    """A proof given as a `Proof`, as its JSON (bytes or str, e.g. the output of `cas prove`),
    or as that JSON decoded (a dict). What has not the shape of a proof is refused
    (`InvalidArgument`, reason `INVALID_PROOF`); whether it proves anything is `verify_proof`'s
    question."""
    if isinstance(data, Proof):
        return data
    if not isinstance(source, str):
        source = "proof"
    try:
        if isinstance(data, (bytes, bytearray, memoryview, str)):
            return encoding.parse_json(data, _PROOF_DECODER)
        if isinstance(data, dict):
            encoding.check_json(data)
            return msgspec.convert(data, Proof)
    except CasError as exc:
        raise InvalidArgument(f"{source} is not a proof: {exc.message}", reason="INVALID_PROOF",
                              **exc.fields) from None
    except msgspec.ValidationError as exc:
        raise InvalidArgument(f"{source} is not a proof: {exc}", reason="INVALID_PROOF") from None
    raise InvalidArgument(f"a proof is a cas.Proof or its JSON (root, case_id, nodes), not "
                          f"{encoding.describe(data)}", reason="INVALID_PROOF")


def verify_proof(proof: Proof, root: str | None = None, case_id: str | None = None) -> bool:
    """True only if `proof` shows `case_id` is in the tree whose root is `root`.

    Needs no repository: each node is re-encoded canonically and hashed, and must be the
    digest its parent (or the root) names. `proof` is a `Proof` or its JSON (`parse_proof`);
    one whose fields or nodes are malformed is simply not a proof (False).
    """
    proof = parse_proof(proof)
    for what, given in (("root", root), ("case_id", case_id)):
        if given is not None and not isinstance(given, str):
            raise InvalidArgument(f"{what} must be a digest string or None, not "
                                  f"{encoding.describe(given)}")
    if not (isinstance(proof.root, str) and isinstance(proof.case_id, str)
            and isinstance(proof.nodes, (list, tuple))):
        return False  # a Proof built by hand with fields of other types
    root = proof.root if root is None else root
    case_id = proof.case_id if case_id is None else case_id
    if root != proof.root or case_id != proof.case_id or not is_digest(case_id):
        return False
    expected, depth = root, 0
    for i, raw in enumerate(proof.nodes):
        try:
            node = msgspec.convert(raw, _NODE_TYPES)
            kind = "tree.leaf" if isinstance(node, TreeLeaf) else "tree.node"
            if node.format != 1 or digest_of(kind, encoding.encode(node)) != expected:
                return False
        except Exception:  # (ValidationError, TypeError, an int the codec cannot write ...)
            return False
        if isinstance(node, TreeLeaf):
            return i == len(proof.nodes) - 1 and case_id in node.ids
        if depth >= 64:  # an id has 64 digits: a deeper inner node is forged, not a proof
            return False
        v = nibble(case_id, depth)
        child = next((c for c in node.children if c.nibble == v), None)
        if child is None:
            return False
        expected, depth = child.node, depth + 1
    return False



def check_proof(proof: Any, root: str | None = None, case_id: str | None = None) -> Proof:
    """The proof, if it shows `case_id` (default: the one it names) in the tree whose root is
    `root` (default: the one it names); else `FailedPrecondition`, reason `PROOF_INVALID`.
    `root` and `case_id` are digests as a person writes them (upper-case hex is folded)."""
    proof = parse_proof(proof)
    root = parse_digest(root, "root") if root is not None else None
    case_id = parse_digest(case_id, "case id") if case_id is not None else None
    if not verify_proof(proof, root=root, case_id=case_id):
        shown_root = root or (proof.root if isinstance(proof.root, str) else None)
        shown_case = case_id or (proof.case_id if isinstance(proof.case_id, str) else None)
        raise FailedPrecondition(f"proof does not show {shown_case} in {shown_root}",
                                 reason="PROOF_INVALID", root=shown_root, case_id=shown_case)
    return proof
"""Small case lists for commits (each list names its shape), and every id of a version."""

import cas


def plain_cases(n: int, tag: str = "c") -> list[dict]:
    """Cases with a short input only."""
    return [{"input": f"{tag}-{i}"} for i in range(n)]


def padded_cases(n: int, tag: str = "c") -> list[dict]:
    """Cases of about 200 bytes each: a few hundred fill several small packs."""
    return [{"input": f"{tag}-{i}", "output": "x" * 200} for i in range(n)]


def tool_cases(n: int, tag: str = "c") -> list[dict]:
    """Cases with a structured input and one tool call."""
    return [{"input": {"q": f"{tag}-{i}"}, "output": i,
             "steps": [{"type": "tool_call", "tool_name": "t", "arguments": {"i": i}}]}
            for i in range(n)]


def read_all_items(repo, name: str, number: int, limit: int = 500) -> list[str]:
    """Every case id of a version, page by page, checking each page keeps to its limit and
    ends at the cursor of the next."""
    out, after, pages = [], None, 0
    while True:
        page = repo.items(name, number, after=after, limit=limit)
        assert len(page.items) <= limit
        pages += 1
        out.extend(page.items)
        if page.next_cursor is None:
            return out
        assert page.items and page.next_cursor == page.items[-1]
        after = page.next_cursor
        assert pages < 10_000


def case_id(case) -> str:
    """The id of a case (a dict or a Case): the digest of its canonical bytes."""
    return cas.encode_case(case).case_id

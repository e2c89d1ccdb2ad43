"""The review page over HTTP (Starlette's test client): pages, the judgment and promotion flows,
and the security rules (Host header, a token on every change, escaping, no person id shown)."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
from markupsafe import escape
from starlette.testclient import TestClient

import cas
from cas.storage.backends.memory import MemoryBackend
from cas_web.app import allowed_hosts, create_app
from support.lifecycle import jsonl, keys, review, run_obj

REVIEWER = "Ada <ada@example.com>"
PERSON = "user-4711-secret"
BASE = "http://127.0.0.1:8300"


@pytest.fixture
def scene(as_reviewer):
    """r-1 (its first message a <script> tag) and r-2 imported, r-2 accepted; datasets `evals`
    and `gold`; a client of a server bound to 127.0.0.1:8300."""
    repo = cas.Repository.create(MemoryBackend())
    repo.import_runs(io.BytesIO(jsonl(
        run_obj("r-1", 1, person=PERSON, steps=[
            {"type": "message", "role": "user", "content": "<script>alert(1)</script>"},
            {"type": "tool_call", "tool_name": "ls", "arguments": {"path": "<b>"},
             "result": None},
            {"type": "tool_call", "tool_name": "cat", "arguments": {"path": "a"}}]),
        run_obj("r-2", 2, person=PERSON))))
    review(repo, "r-2")
    repo.create_dataset("evals")
    client = TestClient(create_app(repo, REVIEWER, "127.0.0.1", 8300), base_url=BASE)
    return repo, client


def token_of(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def test_the_queue_lists_runs_not_yet_judged_and_the_run_page_renders_its_transcript(scene):
    _, client = scene
    r = client.get("/queue")
    assert r.status_code == 200
    assert 'href="/run?id=r-1"' in r.text and 'href="/run?id=r-2"' not in r.text  # r-2 judged
    page = client.get("/run", params={"id": "r-1"}).text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    assert "&lt;b&gt;" in page                          # arguments escaped too
    assert "null" in page and "not recorded" in page    # a recorded null, an unrecorded result
    assert client.get("/").status_code == 200           # redirected to the queue


def test_no_page_shows_a_person_id(scene):
    repo, client = scene
    p = repo.promote_reviewed("evals", "k")
    repo.seal("evals", p["confirm_token"])
    [case_id] = repo.items("evals", 1).items
    assert repo.case("evals", 1, case_id).person == PERSON
    pages = ("/queue", "/run?id=r-1", "/run?id=r-2", "/datasets", "/datasets/evals",
             "/datasets/evals/promote", "/datasets/evals/versions/1",
             f"/datasets/evals/versions/1/cases/{case_id}")
    seen = {page: client.get(page) for page in pages}
    assert all(r.status_code == 200 for r in seen.values())
    assert [page for page, r in seen.items() if PERSON in r.text] == []
    assert "(not shown)" in seen[pages[-1]].text


def test_a_judgment_is_previewed_by_get_and_saved_only_by_a_confirming_post(scene):
    repo, client = scene
    before = keys(repo)
    preview = client.get("/run/judge", params={"id": "r-1", "metric": "dataset_eligibility",
                                                 "label": "reviewed"})
    assert preview.status_code == 200 and "Nothing is saved until you confirm" in preview.text
    assert keys(repo) == before  # a preview stores nothing
    form = {"id": "r-1", "metric": "dataset_eligibility", "label": "reviewed",
            "confirm_token": re.search(r'name="confirm_token" value="([^"]+)"',
                                       preview.text).group(1)}
    assert client.post("/run/judge", data=form).status_code == 403  # no token
    assert client.post("/run/judge", data={**form, "csrf": "forged"}).status_code == 403
    assert keys(repo) == before
    r = client.post("/run/judge", data={**form, "csrf": token_of(preview.text)},
                    follow_redirects=False)
    assert r.status_code == 303
    [saved] = repo.reviews("r-1")
    assert (saved.label, saved.reviewer) == ("reviewed", REVIEWER)
    assert saved.annotation_id in client.get(r.headers["location"]).text


def test_promotion_previews_the_chosen_runs_then_seals_them(scene):
    repo, client = scene
    page = client.get("/datasets/evals/promote")
    assert 'value="r-2"' in page.text and 'value="r-1"' not in page.text  # only accepted runs
    key = re.search(r'name="key" value="([^"]+)"', page.text).group(1)
    form = {"csrf": token_of(page.text), "key": key, "run": ["r-2"]}
    assert client.post("/datasets/evals/promote", data={**form, "csrf": ""}).status_code == 403
    preview = client.post("/datasets/evals/promote", data=form)
    assert preview.status_code == 200 and "r-2" in preview.text
    assert repo.head("evals") == 0  # staged, not sealed
    token = re.search(r'name="confirm_token" value="([^"]+)"', preview.text).group(1)
    r = client.post("/datasets/evals/seal", data={"csrf": form["csrf"], "confirm_token": token,
                                                  "message": "from the page"},
                    follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (303, "/datasets/evals/versions/1")
    v = client.get("/datasets/evals/versions/1").text
    assert "ACTIVE" in v and "r-2" in v and str(repo.pin("evals", 1)) in v
    [case_id] = repo.items("evals", 1).items
    assert case_id in client.get(f"/datasets/evals/versions/1/cases/{case_id}").text
    listing = client.get("/datasets/evals").text
    assert "evals@1" in listing and "from the page" in listing and "admission" in listing


def test_a_retired_version_shows_its_cause_and_lists_no_case(scene):
    repo, client = scene
    p = repo.promote_reviewed("evals", "k")
    repo.seal("evals", p["confirm_token"])
    repo.record_score(repo.pin("evals", 1), metric="acc", value=0.5)
    [case_id] = repo.items("evals", 1).items
    repo.retire("evals", 1, "CONTAMINATED", "leaked into training")
    r = client.get("/datasets/evals/versions/1")
    assert r.status_code == 200
    assert "RETIRED" in r.text and "CONTAMINATED" in r.text and "leaked into training" in r.text
    assert case_id not in r.text and "acc" in r.text  # no case listed; its citations are
    assert client.get(f"/datasets/evals/versions/1/cases/{case_id}").status_code == 409


def test_refusals_render_the_error_and_change_nothing(scene):
    repo, client = scene
    before = keys(repo)
    r = client.get("/run", params={"id": "nope"})
    assert r.status_code == 404 and "RUN_NOT_FOUND" in r.text
    assert client.get("/run").status_code == 400  # no run named
    page = client.get("/datasets/evals/promote")
    r = client.post("/datasets/evals/promote", data={"csrf": token_of(page.text), "key": "k",
                                                     "run": ["r-1"]})  # not accepted
    assert r.status_code == 409 and "REVIEW_REQUIRED" in r.text
    assert client.get("/datasets/evals/diff", params={"a": "x", "b": "1"}).status_code == 400
    assert keys(repo) == before


@pytest.mark.parametrize("host", ["evil.example:8300", "127.0.0.1:9999", "127.0.0.1", None])
def test_a_request_for_another_host_is_refused(scene, host):
    repo, client = scene
    headers = {"host": host} if host else {"host": ""}
    assert client.get("/queue", headers=headers).status_code == 421
    page = client.get("/datasets/evals/promote")
    r = client.post("/datasets/evals/promote", headers=headers,
                    data={"csrf": token_of(page.text), "key": "k", "run": ["r-2"]})
    assert r.status_code == 421 and repo.head("evals") == 0


def test_the_accepted_hosts():
    assert allowed_hosts("127.0.0.1", 8300) == {"127.0.0.1:8300", "localhost:8300"}
    assert allowed_hosts("localhost", 80) == {"127.0.0.1:80", "localhost:80"}
    assert allowed_hosts("10.0.0.5", 8300) == {"10.0.0.5:8300"}
    client = TestClient(create_app(cas.Repository.create(MemoryBackend()), None),
                        base_url="http://localhost:8300")
    assert client.get("/queue").status_code == 200


def test_without_a_reviewer_the_page_is_read_only(scene):
    repo, _ = scene
    client = TestClient(create_app(repo, None, "127.0.0.1", 8300), base_url=BASE)
    assert "read only" in client.get("/queue").text
    r = client.get("/run/judge", params={"id": "r-1", "metric": "m", "label": "ok"})
    assert r.status_code == 409 and "NO_CONFIGURED_PERSON" in r.text


def test_the_promotion_page_shows_a_bounded_list_and_can_stage_every_accepted_run(scene,
                                                                                   monkeypatch):
    repo, client = scene
    review(repo, "r-1")
    monkeypatch.setattr("cas_web.app.PROMOTE_ROWS", 1)  # of the two accepted runs, one shown
    page = client.get("/datasets/evals/promote")
    assert page.text.count('name="run"') == 1 and "The first 1 of 2 accepted runs" in page.text
    key = re.search(r'name="key" value="([^"]+-all)"', page.text).group(1)
    preview = client.post("/datasets/evals/promote", data={
        "csrf": token_of(page.text), "key": key, "all": "1", "tenant": "", "since": ""})
    assert preview.status_code == 200
    assert "r-1" in preview.text and "r-2" in preview.text  # both staged
    assert repo.head("evals") == 0


# Run ids docs/runs.md allows that a URL built by concatenation breaks: a path separator, a query,
# a fragment, a percent escape (valid and not), spaces, non-ASCII, dot segments a browser or HTTP
# client resolves, a path that ends like a page of its own, and HTML and form metacharacters.
ODD_IDS = ["a/b", "a?b", "a#b", "a%20b", "a%b", "a b", "  two  spaces ", "ünï cødé ✓ 日本",
           "..", ".", "/abs", "../x", "a/b/judge", "C:\\x", "a&b=c+d", "<q>\"'", "a/b#c?d%"]


class Page(HTMLParser):
    """The links and forms of a page as a browser reads them (entities decoded): `links`, a
    list of (href, text); `forms`, by id, each (method, action, fields: name -> values)."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []
        self.forms: dict[str | None, tuple[str, str, dict[str, list[str]]]] = {}
        self._link: list[str] | None = None
        self._fields: dict[str, list[str]] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and "href" in a:
            self._link = [a["href"], ""]
        elif tag == "form":
            self._fields = {}
            self.forms[a.get("id")] = (a.get("method", "get"), a.get("action", ""), self._fields)
        elif tag == "input" and self._fields is not None and a.get("name"):
            self._fields.setdefault(a["name"], []).append(a.get("value") or "")

    def handle_data(self, data):
        if self._link is not None:
            self._link[1] += data

    def handle_endtag(self, tag):
        if tag == "a" and self._link is not None:
            self.links.append((self._link[0], self._link[1]))
            self._link = None
        elif tag == "form":
            self._fields = None


def submit(client, form, **fields):
    """Send `form` as a browser does: its fields with `fields` over them; a GET replaces the
    action's query with the fields."""
    method, action, values = form
    data = {**values, **{k: [v] for k, v in fields.items()}}
    if method == "get":
        return client.get(urlsplit(action)._replace(query="").geturl(), params=data)
    return client.post(action, data=data)


@pytest.fixture
def odd(as_reviewer):
    """A repository holding a run under each of ODD_IDS, run n's first message `task n`."""
    repo = cas.Repository.create(MemoryBackend())
    repo.import_runs(io.BytesIO(jsonl(*(run_obj(i, n) for n, i in enumerate(ODD_IDS)))))
    repo.create_dataset("evals")
    return repo, TestClient(create_app(repo, REVIEWER, "127.0.0.1", 8300), base_url=BASE)


def test_every_legal_run_id_opens_from_the_queue_and_is_judged_through_the_pages_forms(odd):
    repo, client = odd
    queue = Page(client.get("/queue").text)
    links = {text: href for href, text in queue.links}
    assert set(ODD_IDS) <= set(links)
    for n, run_id in enumerate(ODD_IDS):
        r = client.get(links[run_id])
        assert r.status_code == 200, run_id
        assert f"<h1>Run <code>{escape(run_id)}</code></h1>" in r.text
        assert f"task {n}" in r.text  # its own transcript, not a neighbour's
        preview = submit(client, Page(r.text).forms["judge"], label="reviewed")
        assert preview.status_code == 200, run_id
        assert f"{escape(run_id)}: <code>dataset_eligibility</code>" in preview.text
        [confirm] = [f for f in Page(preview.text).forms.values() if f[0] == "post"]
        saved = submit(client, confirm)  # follows the redirect to the run's page
        [review_] = repo.reviews(run_id)
        assert (review_.label, review_.reviewer) == ("reviewed", REVIEWER)
        assert saved.status_code == 200 and f"Saved judgment {review_.annotation_id}" in saved.text
        assert f"<code>{escape(run_id)}</code>" in saved.text
    assert "Nothing waits" in client.get("/queue").text


def test_odd_run_ids_are_promoted_exactly_as_the_promotion_form_posts_them(odd):
    repo, client = odd
    for run_id in ODD_IDS:
        review(repo, run_id)
    page = Page(client.get("/datasets/evals/promote").text)
    assert sorted(page.forms["choose"][2]["run"]) == sorted(ODD_IDS)
    preview = submit(client, page.forms["choose"])
    assert preview.status_code == 200
    assert all(f"<td>{escape(run_id)}</td>" in preview.text for run_id in ODD_IDS)
    p = repo.promote_reviewed("evals", page.forms["choose"][2]["key"][0], run_ids=ODD_IDS)
    assert len(p["proposed"]["added"]) == len(ODD_IDS)  # the key replays: the same request


def test_the_old_run_address_opens_the_run_its_decoded_path_names(odd):
    _, client = odd
    r = client.get("/runs/a%2Fb%23c%3Fd%25", follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (303, "/run?id=a%2Fb%23c%3Fd%25")
    assert "<code>a/b#c?d%</code>" in client.get(r.headers["location"]).text
    assert "<code>a/b</code>" in client.get("/runs/a/b").text


def _listed(html: str) -> str:
    """The queue's table of runs (a run named elsewhere on the page is not listed)."""
    return re.findall(r'<table id="queue">.*?</table>', html, re.DOTALL)[0]


def test_the_queue_filter_since_compares_times_and_names_runs_it_cannot_place(as_reviewer):
    repo = cas.Repository.create(MemoryBackend())
    repo.import_runs(io.BytesIO(jsonl(
        run_obj("ny", 1, started_at="2025-05-12T20:27:36-04:00"),  # 00:27 UTC on the 13th
        run_obj("utc", 2, started_at="2025-05-12T22:00:00Z"),
        run_obj("odd", 3, started_at="5/13/2025"))))
    client = TestClient(create_app(repo, REVIEWER, "127.0.0.1", 8300), base_url=BASE)
    r = client.get("/queue", params={"since": "2025-05-12T23:00:00Z"})
    assert r.status_code == 200
    assert ">ny</a>" in _listed(r.text) and ">utc</a>" not in _listed(r.text)
    assert ">odd</a>" not in _listed(r.text)
    assert re.search(r'<p id="undated">Not placed in time.*>odd</a></p>', r.text, re.DOTALL)
    r = client.get("/queue", params={"since": "2025-05-12"})  # a date: its midnight UTC
    assert ">ny</a>" in _listed(r.text) and ">utc</a>" in _listed(r.text)
    assert 'id="undated"' not in client.get("/queue").text  # no filter: nothing left out
    r = client.get("/queue", params={"since": "yesterday"})
    assert r.status_code == 400 and "INVALID_TIME" in r.text and "is not a time" in r.text


@pytest.mark.parametrize("error, status", [(cas.PermissionDenied, 403), (cas.Unavailable, 503)])
def test_a_store_that_refuses_or_is_away_is_said_with_its_own_status(scene, monkeypatch, error,
                                                                     status):
    """A 403 from the store is not a server bug (500) nor an outage (503): the page says which."""
    repo, client = scene

    def failing(*args, **kwargs):
        raise error("permission denied: cannot get 'runs/imports/0000000001' in s3://b/p",
                    key="runs/imports/0000000001")

    monkeypatch.setattr(type(repo), "review_queue", failing)
    page = client.get("/queue")
    assert page.status_code == status and error.code in page.text

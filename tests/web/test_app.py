"""The review page over HTTP (Starlette's test client): pages, the judgment and promotion flows,
and the security rules (Host header, a token on every change, escaping, no person id shown)."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser
from urllib.parse import quote, urlsplit

import pytest
from markupsafe import escape
from starlette.testclient import TestClient

import cas
from cas.storage.backends.memory import MemoryBackend
from cas_web.app import allowed_hosts, create_app
from support.backends import Counting
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
    return re.findall(r'<table id="queue"[^>]*>.*?</table>', html, re.DOTALL)[0]


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


# -- keyboard and bulk judging (issue 36) ----------------------------------------------------
def _keyed(text: str) -> list[tuple[str, ...]]:
    return re.findall(r'<button type="submit" name="label" value="([^"]+)" class="label" '
                      r'id="label-(\d)" data-key="(\d)" aria-keyshortcuts="(\d)">', text)


def test_the_run_page_offers_each_label_on_a_digit_in_declared_order_with_a_legend(scene):
    repo, client = scene
    text = client.get("/run", params={"id": "r-1"}).text
    # the eligibility metric, declared from the start: accepted labels, rejected, needs-work
    assert _keyed(text) == [("accepted", "1", "1", "1"), ("reviewed", "2", "2", "2"),
                            ("rejected", "3", "3", "3"), ("needs-work", "4", "4", "4")]
    assert 'aria-keyshortcuts="c"' in text
    assert "<kbd>1</kbd>–<kbd>4</kbd>" in text and "<kbd>c</kbd>" in text
    assert 'id="next"' not in text and 'id="no-next"' in text  # r-2 is judged: none waits
    repo.define_metric("tone", ["polite", "curt", "rude"])
    text = client.get("/run", params={"id": "r-1", "metric": "tone"}).text
    assert _keyed(text) == [("polite", "1", "1", "1"), ("curt", "2", "2", "2"),
                            ("rude", "3", "3", "3")]
    # an undeclared metric offers the labels given on it before, or none
    text = client.get("/run", params={"id": "r-2", "metric": "style"}).text
    assert _keyed(text) == [] and "no label is known for this metric yet" in text


def test_a_judgment_on_an_undeclared_metric_says_so_on_the_next_page(scene):
    repo, client = scene
    page = client.get("/run", params={"id": "r-1"}).text
    r = client.post("/run/judge", data={
        "id": "r-1", "metric": "dataset_eligibilty", "label": "ok", "quick": "1",
        "csrf": token_of(page)})
    assert r.status_code == 200
    warning = re.search(r'<p class="notice" id="warning">(.*?)</p>', r.text).group(1)
    assert "dataset_eligibilty" in warning and "dataset_eligibility" in warning  # the closest
    [saved] = repo.reviews("r-1")
    assert saved.metric == "dataset_eligibilty"


def test_a_keyboard_judgment_is_saved_by_one_post_and_opens_the_next_run(scene):
    repo, client = scene
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-3", 3), run_obj("r-4", 4))))
    page = client.get("/run", params={"id": "r-1"}).text
    assert 'id="next" href="/run?id=r-3" aria-keyshortcuts="n ArrowRight"' in page
    form = {"id": "r-1", "metric": "dataset_eligibility", "label": "rejected", "quick": "1",
            "tenant": "", "since": ""}
    before = keys(repo)
    assert client.post("/run/judge", data=form).status_code == 403  # no token
    assert client.post("/run/judge", data={**form, "csrf": "forged"}).status_code == 403
    assert keys(repo) == before
    r = client.post("/run/judge", data={**form, "csrf": token_of(page)},
                    follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/run?id=r-3&")
    [saved] = repo.reviews("r-1")
    assert (saved.label, saved.reviewer) == ("rejected", REVIEWER)
    shown = client.get(r.headers["location"]).text
    assert "Run <code>r-3</code>" in shown and saved.annotation_id in shown
    # the last run of the queue: judged, the page stays on it and says nothing else waits
    for run_id in ("r-3", "r-4"):
        r = client.post("/run/judge", data={**form, "id": run_id, "csrf": token_of(page)},
                        follow_redirects=False)
    assert r.headers["location"].startswith("/run?id=r-4&")
    assert "Nothing else waits in the queue" in client.get(r.headers["location"]).text
    assert client.get("/queue").text.count('class="run"') == 0


def test_bulk_judging_applies_one_label_to_every_ticked_run(scene):
    repo, client = scene
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-3", 3), run_obj("r-4", 4))))
    page = client.get("/queue").text
    assert page.count('type="checkbox" name="run"') == 3  # r-1, r-3, r-4 wait
    form = {"metric": "dataset_eligibility", "label": "reviewed", "run": ["r-1", "r-4"]}
    before = keys(repo)
    assert client.post("/queue/judge", data=form).status_code == 403
    assert keys(repo) == before
    r = client.post("/queue/judge", data={**form, "csrf": token_of(page)},
                    follow_redirects=False)
    assert r.status_code == 303
    assert [x.label for x in repo.reviews("r-1") + repo.reviews("r-4")] == ["reviewed"] * 2
    assert repo.reviews("r-3") == []
    after = client.get(r.headers["location"]).text
    assert "Saved 2 judgments" in after and _listed(after).count('class="run"') == 1
    r = client.post("/queue/judge", data={**form, "run": [], "csrf": token_of(page)})
    assert r.status_code == 400  # nothing ticked: refused, nothing saved


def test_a_comment_is_saved_with_the_judgment_and_shown_as_text(scene):
    repo, client = scene
    page = client.get("/run", params={"id": "r-1"}).text
    form = {"id": "r-1", "metric": "dataset_eligibility", "label": "rejected", "quick": "1",
            "comment": "<script>alert(2)</script> wrong tool", "csrf": token_of(page)}
    r = client.post("/run/judge", data=form, follow_redirects=False)
    assert r.status_code == 303
    [saved] = repo.reviews("r-1")
    assert saved.comment == "<script>alert(2)</script> wrong tool"
    shown = client.get("/run", params={"id": "r-1"}).text
    assert "&lt;script&gt;alert(2)&lt;/script&gt; wrong tool" in shown
    assert "<script>alert(2)" not in shown
    # too long: refused by the library, nothing saved
    r = client.post("/run/judge", data={**form, "id": "r-2", "comment": "x" * 5000})
    assert r.status_code == 400 and len(repo.reviews("r-2")) == 1


def test_the_promote_page_shows_each_runs_judgment_and_first_message(scene):
    repo, client = scene
    page = client.get("/datasets/evals/promote").text
    [judgment] = repo.reviews("r-2")
    row = re.search(r'<table id="accepted".*?</table>', page, re.DOTALL).group(0)
    assert judgment.label in row and escape(REVIEWER) in row and judgment.reviewed_at in row
    assert "task 2" in row  # its first user message
    assert judgment.annotation_id not in row


def test_a_version_of_long_outcomes_shows_summaries_that_open_in_pages_of_100(as_reviewer):
    repo = cas.Repository.create(MemoryBackend())
    repo.create_dataset("wide", admission="direct")
    long = "x" * 5000
    repo.commit("wide", base=None, add=[
        {"run_id": f"r-{i}", "output": "o", "outcome": {"status": "ok", "log": long, "i": i,
                                                         "more": [1, 2]},
         "metadata": {"model": "m-1", "trace": long}} for i in range(150)])
    client = TestClient(create_app(repo, REVIEWER, "127.0.0.1", 8300), base_url=BASE)
    page = client.get("/datasets/wide/versions/1").text
    rows = re.findall(r'<td class="outcome"><details><summary>([^<]*)</summary>', page)
    assert len(rows) == 100
    assert "log: xxx" in rows[0] and "… (+1 more)" in rows[0]  # 3 of 4 fields, cut
    assert len(rows[0]) < 200 and long in page  # the whole value is in its box
    assert page.count('<td class="metadata"><details>') == 100
    more = re.search(r'id="more" href="([^"]+)"', page).group(1).replace("&amp;", "&")
    second = client.get(more).text
    assert second.count('<td class="outcome">') == 50 and 'id="more"' not in second


def test_the_experiments_page_shows_two_experiments_in_charts_and_differences(as_reviewer):
    from support.experiments import WORSE, scored_repo
    repo, ids = scored_repo()
    client = TestClient(create_app(repo, REVIEWER, "127.0.0.1", 8300), base_url=BASE)
    listing = client.get("/datasets/evals/versions/1/experiments").text
    assert "baseline" in listing and "candidate" in listing and "later" not in listing
    assert "datasets/evals/scores/0000000001" in listing and "<svg" not in listing
    page = client.get("/datasets/evals/versions/1/experiments",
                      params={"a": "baseline", "b": "candidate"}).text
    assert page.count("<svg") == 2 and "<script" not in page.split("</main>")[0]
    assert 'data-metric="exact"' in page and 'data-metric="quality"' in page
    assert "Verdict: " in page
    diffs = re.search(r'<table id="differences".*?</table>', page, re.DOTALL).group(0)
    worse = ids[WORSE[0]]
    assert f"/datasets/evals/versions/1/cases/{quote(worse, safe='')}" in diffs
    assert f'href="/run?id=r-{WORSE[0]}"' in diffs and f"answer {WORSE[0]} wrong" in diffs
    assert client.get("/datasets/evals/versions/1/experiments",
                      params={"a": "baseline"}).status_code == 400
    assert client.get("/datasets/evals/versions/1/experiments",
                      params={"a": "baseline", "b": "nope"}).status_code == 404
    r = client.get("/datasets/evals/versions/1/experiments",
                   params={"a": "baseline", "b": "later"})  # over evals@2
    assert r.status_code == 400 and "EXPERIMENT_VERSION_MISMATCH" in r.text
    case = client.get(f"/datasets/evals/versions/2/cases/{quote(worse, safe='')}").text
    scores = re.search(r'<table id="scores".*?</table>', case, re.DOTALL).group(0)
    assert "evals@1" in scores and "evals@2" in scores and "later" in scores
    assert "candidate" in scores and "baseline" in scores


def test_under_two_reviewers_the_keyboard_goes_to_the_runs_still_needing_my_judgment(scene):
    repo, client = scene
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-3", 3))))
    repo.set_eligibility(reviewers=2)
    # r-2 holds my judgment (the scene's), r-1 another reviewer's: both still wait
    request = [{"run_id": "r-1", "metric": "dataset_eligibility", "label": "reviewed"}]
    other = "Bo <bo@example.com>"
    repo.add_reviews(request, reviewer=other, confirm_token=repo.add_reviews(
        request, reviewer=other)["confirm_token"])
    assert _listed(client.get("/queue").text).count('class="run"') == 3  # each needs two
    mine = _listed(client.get("/queue", params={"mine": "1"}).text)
    assert ">r-1</a>" in mine and ">r-2</a>" not in mine and ">r-3</a>" in mine
    page = client.get("/run", params={"id": "r-1"}).text
    assert 'id="next" href="/run?id=r-3"' in page
    r = client.post("/run/judge", data={"id": "r-3", "metric": "dataset_eligibility",
                                        "label": "reviewed", "quick": "1",
                                        "csrf": token_of(page)}, follow_redirects=False)
    assert r.headers["location"].startswith("/run?id=r-1&")  # not r-2: I judged it


def test_under_two_reviewers_the_promote_page_shows_both_admitting_judgments(scene):
    repo, client = scene
    repo.set_eligibility(reviewers=2)
    request = [{"run_id": "r-2", "metric": "dataset_eligibility", "label": "accepted"}]
    other = "Bo <bo@example.com>"
    repo.add_reviews(request, reviewer=other, confirm_token=repo.add_reviews(
        request, reviewer=other)["confirm_token"])
    row = re.search(r'<table id="accepted".*?</table>', client.get(
        "/datasets/evals/promote").text, re.DOTALL).group(0)
    assert "reviewed<br>accepted" in row and f"{escape(REVIEWER)}<br>{escape(other)}" in row


def test_a_correction_is_saved_with_the_judgment_and_shown_beside_the_run(scene):
    repo, client = scene
    page = client.get("/run", params={"id": "r-1"}).text
    form = {"id": "r-1", "metric": "dataset_eligibility", "label": "accepted", "quick": "1",
            "correction": '{"answer": "<b>40 EUR</b>"}', "csrf": token_of(page)}
    r = client.post("/run/judge", data={**form, "correction": "{not json"})
    assert r.status_code == 400 and "INVALID_CORRECTION" in r.text and repo.reviews("r-1") == []
    assert client.post("/run/judge", data={**form, "correction": "null"}).status_code == 400
    assert client.post("/run/judge", data=form, follow_redirects=False).status_code == 303
    [saved] = repo.reviews("r-1")
    assert saved.correction == {"answer": "<b>40 EUR</b>"}
    shown = client.get("/run", params={"id": "r-1"}).text
    cell = re.search(r'<td class="correction">(.*?)</td>', shown, re.DOTALL).group(1)
    assert "answer: &lt;b&gt;40 EUR&lt;/b&gt;" in cell and "<b>40" not in cell


def test_a_warning_is_never_text_a_link_carries(scene):
    """The page says a judgment's warning again from the library: a crafted link cannot put
    words on it."""
    _, client = scene
    page = client.get("/run", params={"id": "r-1", "warned": "1", "label": "reviewed",
                                      "warning": "Your session expired: log in at evil.test"})
    assert page.status_code == 200 and "evil.test" not in page.text
    assert 'id="warning"' not in page.text  # a declared metric and label earn no warning


def test_a_version_page_reads_its_cases_in_one_batch():
    """A page of a version's cases shows each one's metadata from one batch of reads (on S3
    a read is a request): far fewer storage calls than the cases it lists."""
    backend = MemoryBackend()
    repo = cas.Repository.create(backend)
    repo.create_dataset("d", admission="direct")
    repo.commit("d", base=None, add=[{"input": i, "metadata": {"n": f"meta-{i}"}}
                                     for i in range(300)])
    counting = Counting(backend)
    client = TestClient(create_app(cas.Repository(counting), None, "127.0.0.1", 8300),
                        base_url=BASE)
    counting.calls.clear()
    page = client.get("/datasets/d/versions/1")
    shown = set(re.findall(r"meta-(\d+)", page.text))
    assert page.status_code == 200 and len(shown) == 100  # a page of 100, with its metadata
    assert sum(counting.calls.values()) < 100, counting.calls

"""The review page over HTTP (Starlette's test client): pages, the judgment and promotion flows,
and the security rules (Host header, a token on every change, escaping, no person id shown)."""

from __future__ import annotations

import io
import re

import pytest
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
    assert 'href="/runs/r-1"' in r.text and 'href="/runs/r-2"' not in r.text  # r-2 judged
    page = client.get("/runs/r-1").text
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
    pages = ("/queue", "/runs/r-1", "/runs/r-2", "/datasets", "/datasets/evals",
             "/datasets/evals/promote", "/datasets/evals/versions/1",
             f"/datasets/evals/versions/1/cases/{case_id}")
    seen = {page: client.get(page) for page in pages}
    assert all(r.status_code == 200 for r in seen.values())
    assert [page for page, r in seen.items() if PERSON in r.text] == []
    assert "(not shown)" in seen[pages[-1]].text


def test_a_judgment_is_previewed_by_get_and_saved_only_by_a_confirming_post(scene):
    repo, client = scene
    before = keys(repo)
    preview = client.get("/runs/r-1/judge", params={"metric": "dataset_eligibility",
                                                      "label": "reviewed"})
    assert preview.status_code == 200 and "Nothing is saved until you confirm" in preview.text
    assert keys(repo) == before  # a preview stores nothing
    form = {"metric": "dataset_eligibility", "label": "reviewed",
            "confirm_token": re.search(r'name="confirm_token" value="([^"]+)"',
                                       preview.text).group(1)}
    assert client.post("/runs/r-1/judge", data=form).status_code == 403  # no token
    assert client.post("/runs/r-1/judge", data={**form, "csrf": "forged"}).status_code == 403
    assert keys(repo) == before
    r = client.post("/runs/r-1/judge", data={**form, "csrf": token_of(preview.text)},
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
    r = client.get("/runs/nope")
    assert r.status_code == 404 and "RUN_NOT_FOUND" in r.text
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
    r = client.get("/runs/r-1/judge", params={"metric": "m", "label": "ok"})
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

"""The review page in a real headless Chromium: a reviewer judges a run from the queue, promotes
it and sees the new version; a retired version shows its cause and no case. Screenshots of the
main pages go to $CAS_SCREENSHOTS (docs/web.md's are taken with CAS_SCREENSHOTS=docs/web)."""

from __future__ import annotations

import io

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait

import cas
from cas.storage.backends.memory import MemoryBackend
from cas_web.app import create_app
from support import ROOT
from support.browser import chrome, screenshot, serve
from support.lifecycle import jsonl, run_obj

EXAMPLES = ROOT / "examples"
REVIEWER = "Ada Lovelace <ada@example.com>"


@pytest.fixture
def repo():
    """The quick start's runs and reviews; support-evals@1 holds acme's accepted runs."""
    repo = cas.Repository.create(MemoryBackend())
    with open(EXAMPLES / "runs.jsonl", "rb") as f:
        repo.import_runs(f, author=REVIEWER)
    with open(EXAMPLES / "reviews.jsonl", "rb") as f:
        requests = cas.repo.reviews.read_review_requests(f, "reviews.jsonl")
    token = repo.add_reviews(requests, reviewer=REVIEWER)["confirm_token"]
    repo.add_reviews(requests, confirm_token=token, reviewer=REVIEWER)
    repo.create_dataset("support-evals", description="Reviewed support and ops agent runs",
                        author=REVIEWER)
    p = repo.promote_reviewed("support-evals", "v1", tenant="acme", author=REVIEWER)
    repo.seal("support-evals", p["confirm_token"], author=REVIEWER, message="acme runs")
    return repo


def text(driver, css: str) -> str:
    """The text of the element `css` names, once the page that holds it has loaded (a click
    that submits a form returns before the next page has come)."""
    return WebDriverWait(driver, 10).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css))).text


def test_a_reviewer_judges_a_run_promotes_it_and_reads_the_new_version(repo):
    with serve(lambda host, port: create_app(repo, REVIEWER, host, port)) as url, \
            chrome() as driver:
        driver.set_window_size(1280, 900)
        # the queue: r-0705 waits for a judgment
        driver.get(url + "/queue")
        assert "r-0705" in text(driver, "#queue")
        screenshot(driver, "queue")
        driver.find_element(By.LINK_TEXT, "r-0705").click()
        # the run as a transcript, then the judgment: preview, then confirm
        assert "Run r-0705" in text(driver, "h1")
        shown = text(driver, "#transcript")
        assert "What are the headline changes in Python 3.13?" in shown
        assert "tool call web.search" in shown and "tool call web.fetch" in shown
        assert "not recorded" in shown  # web.fetch's result was not recorded
        screenshot(driver, "run")
        Select(driver.find_element(By.NAME, "label")).select_by_visible_text("reviewed")
        driver.find_element(By.CSS_SELECTOR, "#judge button").click()
        assert "dataset_eligibility = reviewed by " + REVIEWER in text(driver, "#preview")
        assert repo.reviews("r-0705") == []  # the preview saved nothing
        screenshot(driver, "judge")
        driver.find_element(By.ID, "confirm").click()
        note = text(driver, "#saved")
        [saved] = repo.reviews("r-0705")
        assert (saved.label, saved.reviewer) == ("reviewed", REVIEWER)
        assert saved.annotation_id in note
        assert saved.annotation_id in text(driver, "#reviews")
        # promotion: the accepted runs of tenant umbrella, r-0705 among them
        driver.get(url + "/datasets/support-evals/promote?tenant=umbrella")
        assert "r-0705" in text(driver, "#accepted")
        screenshot(driver, "promote")
        driver.find_element(By.ID, "preview").click()
        proposed = text(driver, "#proposed")
        assert "r-0705" in proposed and "carried" in proposed
        assert repo.head("support-evals") == 1  # staged, not sealed
        screenshot(driver, "preview")
        driver.find_element(By.NAME, "message").send_keys("umbrella runs, from the page")
        driver.find_element(By.ID, "seal-button").click()
        # the new version: active, its cases with their runs, its pin
        assert "ACTIVE" in text(driver, "#state")  # (waits for the version's page)
        assert text(driver, "h1") == "support-evals@2"
        assert "r-0705" in text(driver, "#cases")
        pin = driver.find_element(By.ID, "pin").get_attribute("value")
        assert pin == str(repo.pin("support-evals", 2))
        v2 = repo.version("support-evals", 2)
        assert (v2.item_count, v2.author, v2.message) == (
            14, REVIEWER, "umbrella runs, from the page")
        screenshot(driver, "version")
        # a retired version: its cause and time, and no case
        repo.retire("support-evals", 1, "CONTAMINATED", "leaked into a training set",
                    author=REVIEWER)
        driver.get(url + "/datasets/support-evals")
        rows = text(driver, "#versions")
        assert "support-evals@1 RETIRED CONTAMINATED" in rows and "support-evals@2 ACTIVE" in rows
        screenshot(driver, "dataset")
        driver.get(url + "/datasets/support-evals/versions/1")
        assert "RETIRED CONTAMINATED" in text(driver, "#state")
        assert driver.find_elements(By.ID, "cases") == []
        assert repo.fsck().ok


def test_a_run_whose_id_holds_a_slash_a_fragment_a_query_and_a_percent_is_judged(as_reviewer):
    """A legal run id a concatenated link would cut at its `/`, `#`, `?` or `%` (docs/runs.md)."""
    odd = "a/b#c?d%"
    repo = cas.Repository.create(MemoryBackend())
    repo.import_runs(io.BytesIO(jsonl(run_obj("a", 0), run_obj(odd, 1))))
    with serve(lambda host, port: create_app(repo, REVIEWER, host, port)) as url, \
            chrome() as driver:
        driver.get(url + "/queue")
        driver.find_element(By.LINK_TEXT, odd).click()
        assert text(driver, "h1") == f"Run {odd}"
        assert "task 1" in text(driver, "#transcript")  # its own, not run a's
        Select(driver.find_element(By.NAME, "label")).select_by_visible_text("reviewed")
        driver.find_element(By.CSS_SELECTOR, "#judge button").click()
        assert f"{odd}: dataset_eligibility = reviewed" in text(driver, "#preview")
        driver.find_element(By.ID, "confirm").click()
        note = text(driver, "#saved")
        [saved] = repo.reviews(odd)
        assert saved.annotation_id in note and text(driver, "h1") == f"Run {odd}"
        assert repo.reviews("a") == []

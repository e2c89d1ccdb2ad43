"""The review page in a real headless Chromium: a reviewer judges a run from the queue, promotes
it and sees the new version; a retired version shows its cause and no case. Screenshots of the
main pages go to $CAS_SCREENSHOTS (docs/web.md's are taken with CAS_SCREENSHOTS=docs/web)."""

from __future__ import annotations

import io
import time

import pytest
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
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
        Select(driver.find_element(By.CSS_SELECTOR, "#judge select")).select_by_visible_text(
            "reviewed")
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
        Select(driver.find_element(By.CSS_SELECTOR, "#judge select")).select_by_visible_text(
            "reviewed")
        driver.find_element(By.CSS_SELECTOR, "#judge button").click()
        assert f"{odd}: dataset_eligibility = reviewed" in text(driver, "#preview")
        driver.find_element(By.ID, "confirm").click()
        note = text(driver, "#saved")
        [saved] = repo.reviews(odd)
        assert saved.annotation_id in note and text(driver, "h1") == f"Run {odd}"
        assert repo.reviews("a") == []


# -- keyboard and bulk judging, results in charts (issue 36) ---------------------------------
def queue_of(n: int) -> cas.Repository:
    repo = cas.Repository.create(MemoryBackend())
    repo.import_runs(io.BytesIO(jsonl(*(run_obj(f"r-{i:03}", i) for i in range(n)))))
    return repo


def press(driver, keys: str) -> None:
    ActionChains(driver).send_keys(keys).perform()


def next_page(driver, old) -> None:
    """Wait until the page that held `old` (an element) has been replaced. (Asked while the
    browser is between two documents, Chromium may answer with an inspector error instead of
    "stale": that is asked again, not a failure.)"""
    def replaced(_driver) -> bool:
        try:
            old.is_enabled()
        except StaleElementReferenceException:
            return True
        return False
    WebDriverWait(driver, 10, ignored_exceptions=(WebDriverException,)).until(replaced)


def test_judging_100_runs_from_the_keyboard(as_reviewer, capsys):
    repo = queue_of(100)
    with serve(lambda host, port: create_app(repo, REVIEWER, host, port)) as url, \
            chrome() as driver:
        driver.get(url + "/queue")
        driver.find_element(By.LINK_TEXT, "r-000").click()
        assert text(driver, "h1") == "Run r-000"
        legend = text(driver, "#keys")
        # the eligibility metric's declared labels: accepted, reviewed, rejected, needs-work
        assert [b.text for b in driver.find_elements(By.CSS_SELECTOR, "#keyboard .label")] == [
            "1 accepted", "2 reviewed", "3 rejected", "4 needs-work"]
        assert legend.startswith("Keys: 1–4 save the judgment with that label") and \
            "c write a comment" in legend and "n or → the next run" in legend
        assert driver.find_element(By.ID, "label-1").get_attribute("aria-keyshortcuts") == "1"
        screenshot(driver, "keyboard")
        # `n` and the right arrow open the next run without judging; the queue keeps them
        old = driver.find_element(By.TAG_NAME, "h1")
        press(driver, "n")
        next_page(driver, old)
        assert text(driver, "h1") == "Run r-001"
        old = driver.find_element(By.TAG_NAME, "h1")
        press(driver, Keys.ARROW_RIGHT)
        next_page(driver, old)
        assert text(driver, "h1") == "Run r-002"
        # `c` focuses the comment box; a digit typed there is text, not a judgment
        press(driver, "c")
        assert driver.switch_to.active_element.get_attribute("id") == "comment"
        press(driver, "2")
        assert driver.find_element(By.ID, "comment").get_attribute("value") == "2"
        press(driver, Keys.ESCAPE)
        driver.find_element(By.ID, "comment").clear()
        driver.get(url + "/run?id=r-000")
        assert repo.reviews("r-000") == [] and repo.reviews("r-002") == []
        # 100 judgments: `2` (reviewed) then `3` (rejected) in turn, each opening the next run
        started = time.perf_counter()
        for i in range(100):
            old = driver.find_element(By.TAG_NAME, "h1")
            press(driver, "2" if i % 2 == 0 else "3")
            next_page(driver, old)
        took = time.perf_counter() - started
        assert "Nothing else waits in the queue" in text(driver, "#saved")
        labels = [[r.label for r in repo.reviews(f"r-{i:03}")] for i in range(100)]
        assert labels == [["reviewed" if i % 2 == 0 else "rejected"] for i in range(100)]
        assert {r.reviewer for i in range(100) for r in repo.reviews(f"r-{i:03}")} == {REVIEWER}
        with capsys.disabled():
            print(f"\njudging 100 runs from the keyboard in Chromium: {took:.2f} s "
                  f"({took * 10:.0f} ms a run, page load included)")


def test_bulk_judging_from_the_queue(as_reviewer):
    repo = queue_of(5)
    with serve(lambda host, port: create_app(repo, REVIEWER, host, port)) as url, \
            chrome() as driver:
        driver.get(url + "/queue")
        for i in (1, 3, 4):
            driver.find_element(By.ID, f"tick-{i}").click()
        screenshot(driver, "bulk")
        old = driver.find_element(By.ID, "queue")
        driver.find_element(By.ID, "bulk-3").click()  # rejected
        next_page(driver, old)
        assert "Saved 3 judgments" in text(driver, "#judged")
        assert [len(repo.reviews(f"r-{i:03}")) for i in range(5)] == [1, 0, 1, 1, 0]
        assert {repo.reviews(r)[0].label for r in ("r-000", "r-002", "r-003")} == {"rejected"}
        listed = text(driver, "#queue")
        assert "r-001" in listed and "r-004" in listed and "r-000" not in listed
        # "tick every run of this page", then one label for all
        driver.find_element(By.ID, "all").click()
        old = driver.find_element(By.ID, "queue")
        driver.find_element(By.ID, "bulk-2").click()
        next_page(driver, old)
        assert "Nothing waits" in text(driver, "#queue")
        assert repo.reviews("r-004")[0].label == "reviewed"


def test_a_script_in_a_comment_or_a_message_is_shown_as_text(as_reviewer):
    repo = cas.Repository.create(MemoryBackend())
    attack = "<script>document.title='owned'</script><img src=x onerror=\"document.title='x'\">"
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-1", 1, steps=[
        {"type": "message", "role": "user", "content": attack}]), run_obj("r-2", 2))))
    with serve(lambda host, port: create_app(repo, REVIEWER, host, port)) as url, \
            chrome() as driver:
        driver.get(url + "/run?id=r-1")
        assert attack in text(driver, "#transcript")
        driver.find_element(By.ID, "comment").send_keys(attack)
        old = driver.find_element(By.TAG_NAME, "h1")
        driver.find_element(By.ID, "comment").send_keys(Keys.ESCAPE)
        press(driver, "1")
        next_page(driver, old)
        assert text(driver, "h1") == "Run r-2"  # saved, and the next run opened
        assert repo.reviews("r-1")[0].comment == attack
        driver.get(url + "/run?id=r-1")
        assert attack in text(driver, "#reviews .comment")
        assert "owned" not in driver.title and driver.title != "x"


def test_the_experiments_page_draws_labelled_charts_and_lists_the_differences(as_reviewer):
    from support.experiments import WORSE, scored_repo
    repo, ids = scored_repo()
    with serve(lambda host, port: create_app(repo, REVIEWER, host, port)) as url, \
            chrome() as driver:
        driver.get(url + "/datasets/evals/versions/1")
        driver.find_element(By.ID, "experiments").click()
        assert "baseline" in text(driver, "#experiment-list")
        driver.find_element(By.ID, "compare").click()
        chart = WebDriverWait(driver, 10).until(expected_conditions.presence_of_element_located(
            (By.CSS_SELECTOR, "figure#chart-2 svg")))
        assert chart.size["width"] > 300 and chart.size["height"] > 100  # drawn, not empty
        titles = [t.text for t in driver.find_elements(By.CSS_SELECTOR, "#chart-2 svg text")]
        assert "quality" in titles and "score" in titles and "cases" in titles
        assert "baseline" in titles and "candidate" in titles
        assert driver.find_element(By.CSS_SELECTOR, "#chart-2 svg").get_attribute(
            "aria-label") == "distribution of quality"
        assert "Verdict:" in text(driver, "#verdict")
        driver.execute_script("arguments[0].scrollIntoView()",
                              driver.find_element(By.ID, "chart-2"))
        screenshot(driver, "experiments")
        # the largest difference first, its case and its run one click away
        first = driver.find_element(By.CSS_SELECTOR, "#differences tr:nth-child(2)")
        assert first.find_elements(By.TAG_NAME, "td")[5].text == "1"
        driver.find_element(By.LINK_TEXT, f"r-{WORSE[0]}").click()
        assert text(driver, "h1") == f"Run r-{WORSE[0]}"
        driver.back()
        driver.find_element(By.LINK_TEXT, ids[WORSE[0]]).click()
        scores = text(driver, "#scores")
        assert "evals@1 baseline exact true" in scores and "evals@1 candidate exact false" in \
            scores and "evals@2 later quality 0.5" in scores


def test_a_version_of_long_outcomes_never_scrolls_sideways_at_1280(as_reviewer):
    repo = cas.Repository.create(MemoryBackend())
    repo.create_dataset("wide", admission="direct")
    unbroken = "y" * 3000
    repo.commit("wide", base=None, add=[
        {"run_id": f"r-{i}-" + "z" * 200, "tenant": "t" * 300, "output": "o",
         "outcome": {"status": unbroken, "trace": [unbroken] * 3, "i": i},
         "metadata": {"model": unbroken, "n": i}} for i in range(120)])
    with serve(lambda host, port: create_app(repo, REVIEWER, host, port)) as url, \
            chrome() as driver:
        driver.set_window_size(1280, 900)
        driver.get(url + "/datasets/wide/versions/1")
        assert len(driver.find_elements(By.CSS_SELECTOR, "#cases td.outcome")) == 100

        def sideways() -> int:
            return driver.execute_script(
                "return document.documentElement.scrollWidth - "
                "document.documentElement.clientWidth")
        assert sideways() <= 0
        for box in driver.find_elements(By.CSS_SELECTOR, "#cases details")[:4]:
            box.find_element(By.TAG_NAME, "summary").click()  # the whole value, in its box
        assert driver.find_element(By.CSS_SELECTOR, "#cases details[open] pre").is_displayed()
        assert sideways() <= 0
        screenshot(driver, "version-long")
        driver.find_element(By.ID, "more").click()
        WebDriverWait(driver, 10).until(lambda d: len(d.find_elements(
            By.CSS_SELECTOR, "#cases td.outcome")) == 20)
        assert sideways() <= 0

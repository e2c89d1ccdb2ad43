"""Agreement between reviewers (cas/repo/agreement.py): per pair observed agreement and Cohen's
kappa, over three or more Krippendorff's alpha and Fleiss' kappa, the disagreeing runs; each
reviewer's newest judgment counts once."""

from __future__ import annotations

import builtins
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.repo import agreement as agreement_module
from support.lifecycle import jsonl, run_obj

ADA, BOB, CY = "Ada <ada@example.com>", "Bob <bob@example.com>", "Cy <cy@example.com>"
M = "dataset_eligibility"


def judge(repo, monkeypatch, who: str, labels: dict[str, str], metric: str = M) -> None:
    monkeypatch.setenv("CAS_USER", who)
    for run_id, label in labels.items():
        repo.review(run_id, metric, label)


@pytest.fixture
def planted(mem, monkeypatch, tmp_path):
    """Ten runs; Ada and Bob agree on eight of them and disagree on r-3 and r-7; Cy judged
    six of them and disagrees with both on r-5."""
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "config.json"))
    mem.import_runs(io.BytesIO(jsonl(*(run_obj(f"r-{i}", i) for i in range(10)))))
    ada = {f"r-{i}": ("accepted" if i % 2 else "rejected") for i in range(10)}
    bob = dict(ada, **{"r-3": "rejected", "r-7": "needs-work"})
    cy = {f"r-{i}": ada[f"r-{i}"] for i in range(6)}
    cy["r-5"] = "needs-work"
    judge(mem, monkeypatch, ADA, {"r-3": "rejected"})  # superseded by Ada's newer judgment
    judge(mem, monkeypatch, ADA, ada)
    judge(mem, monkeypatch, BOB, bob)
    judge(mem, monkeypatch, CY, cy)
    return mem


def test_agreement_on_planted_disagreement(planted):
    report = planted.agreement()
    assert report["reviewers"] == [ADA, BOB, CY] and report["runs_judged"] == 10
    assert report["labels"] == ["accepted", "reviewed", "rejected", "needs-work"]
    ab, ac, bc = report["pairs"]
    assert ab["reviewers"] == [ADA, BOB] and ab["runs"] == 10 and ab["observed"] == 0.8
    assert {d["run_id"] for d in ab["disagreements"]} == {"r-3", "r-7"}
    assert ab["disagreements"][0]["labels"] == {ADA: "accepted", BOB: "rejected"}
    # Cohen's kappa by hand: Ada accepts 5 of 10, Bob 3; Ada rejects 5, Bob 6 (and 1 needs-work)
    pe = (5 / 10) * (3 / 10) + (5 / 10) * (6 / 10)
    assert ab["cohens_kappa"] == pytest.approx((0.8 - pe) / (1 - pe))  # 0.636
    assert ac["runs"] == 6 and ac["observed"] == pytest.approx(5 / 6)
    assert bc["runs"] == 6 and [d["run_id"] for d in bc["disagreements"]] == ["r-3", "r-5"]
    overall = report["overall"]
    assert overall["runs"] == 10 and overall["fleiss_runs"] == 6
    assert -1 <= overall["krippendorff_alpha"] < 1 and -1 <= overall["fleiss_kappa"] < 1
    assert report["disagreement_count"] == 3
    assert [d["run_id"] for d in report["disagreements"]] == ["r-3", "r-5", "r-7"]


def test_agreement_of_full_agreement_and_of_one_label(mem, monkeypatch, tmp_path):
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "config.json"))
    mem.import_runs(io.BytesIO(jsonl(*(run_obj(f"r-{i}", i) for i in range(4)))))
    labels = {"r-0": "calm", "r-1": "curt", "r-2": "calm", "r-3": "curt"}
    judge(mem, monkeypatch, ADA, labels, "tone")
    judge(mem, monkeypatch, BOB, labels, "tone")
    [pair] = mem.agreement("tone")["pairs"]
    assert (pair["observed"], pair["cohens_kappa"], pair["disagreements"]) == (1.0, 1.0, [])
    judge(mem, monkeypatch, ADA, dict.fromkeys(labels, "calm"), "voice")
    judge(mem, monkeypatch, BOB, dict.fromkeys(labels, "calm"), "voice")
    [pair] = mem.agreement("voice")["pairs"]
    assert pair["observed"] == 1.0 and pair["cohens_kappa"] is None  # chance agreement is total
    assert mem.agreement("nobody")["pairs"] == [] and mem.agreement("nobody")["overall"] is None


def test_agreement_without_the_extra_is_refused_naming_it(mem, monkeypatch):
    real = builtins.__import__

    def no_statsmodels(name, *args, **kwargs):
        if name.startswith("statsmodels"):
            raise ImportError(name=name)
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_statsmodels)
    with pytest.raises(cas.FailedPrecondition) as info:
        mem.agreement()
    assert info.value.reason == "EXTRA_REQUIRED" and info.value.fields == {"extra": "agreement"}
    assert "pip install '.[agreement]'" in info.value.message


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("abc")), min_size=1,
                max_size=30))
def test_cohens_kappa_is_symmetric_in_the_reviewers(pairs):
    numpy, inter_rater, _ = agreement_module.libraries()
    table = numpy.zeros((3, 3))
    for x, y in pairs:
        table["abc".index(x), "abc".index(y)] += 1
    one = agreement_module._finite(lambda: inter_rater.cohens_kappa(table).kappa)
    other = agreement_module._finite(lambda: inter_rater.cohens_kappa(table.T).kappa)
    assert (one is None) == (other is None)
    if one is not None:
        assert one == pytest.approx(other)
        observed = sum(x == y for x, y in pairs) / len(pairs)
        assert one <= observed + 1e-9 or observed == 1.0  # chance only lowers it

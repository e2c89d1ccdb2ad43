"""examples/capture_loop.py, the production loop end to end: capture, review, promotion, an eval
set and a regression run, on a local repository."""

from __future__ import annotations

import importlib.util

import cas
from cas.evals import evalset
from cas.evals.capture import pipeline as capture
from support import ROOT

EXAMPLE = ROOT / "examples" / "capture_loop.py"


def test_the_capture_loop_example_runs_end_to_end(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CAS_USER", "Ada Lovelace <ada@example.com>")
    monkeypatch.delenv("CAS_CAPTURE", raising=False)
    spec = importlib.util.spec_from_file_location("capture_loop", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        assert module.main(str(tmp_path / "repo")) == 0
    finally:
        capture.reset()
    out = capsys.readouterr().out
    repo = cas.open(str(tmp_path / "repo"))
    # the crash and the failed tool were captured, reviewed and promoted; nobody's id is stored
    assert sorted(r.split("-")[0] for r in repo.runs()) == ["capture", "capture", "replay",
                                                              "replay", "replay"]
    assert repo.version("support-failures", 1).item_count == 2
    stored = b"".join(repo.backend.get(k) for k in repo.backend.list(""))
    for secret in (b"alice", b"bob@example.com", b"carol", b"chat-bob"):
        assert secret not in stored
    corpus = evalset.open(repo, "support-regressions")
    assert sorted(s.kind for s in corpus.cases()) == ["failure", "failure", "win"]
    assert "exit 0" in out and "improved" in out and "fsck: ok" in out
    # the regression run's scores cite the eval set's exact version
    assert {s.version for s in repo.scores("support-regressions")} == {corpus.version}

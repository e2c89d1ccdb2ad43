"""`cas settings show` and `content-policy`: what promotion copies into cases, for the
repository and per dataset."""

import json

from support.cli import ADA, ok_json, refused, seal, subject, subjects_file


def test_settings_content_policy(run, reviewed, tmp_path):
    assert ok_json(run("--json", "settings", "show")) == {
        "revision": 0, "dataset": None, "overridden": False, "withheld": [],
        "copied": ["input", "output", "tool_arguments", "tool_results", "metadata"],
        "eligibility": {"revision": 0, "metric": "dataset_eligibility",
                        "accepted": ["accepted", "reviewed"]}}
    r = run("settings", "show")
    assert r.stdout == "copied: input, output, tool_arguments, tool_results, metadata\n" \
                       "withheld: -\npromotion needs: dataset_eligibility = accepted or reviewed\n"
    record = ok_json(run("--json", "settings", "content-policy", "--withhold", "tool_results",
                         "--withhold", "input"))
    assert record == {"kind": "settings", "format": 1, "revision": 1,
                      "withheld": ["input", "tool_results"], "author": ADA,
                      "edited_at": record["edited_at"]}
    assert run("settings", "show").stdout == ("copied: output, tool_arguments, metadata\n"
                                              "withheld: input, tool_results\n"
                                              "promotion needs: dataset_eligibility = "
                                              "accepted or reviewed\n")
    one_of = "give one of --withhold CLASS (repeatable), --copy-all or --inherit (with --dataset)"
    refused(run, tmp_path, ("settings", "content-policy"), 2, "INVALID_ARGUMENT", None, one_of)
    refused(run, tmp_path, ("settings", "content-policy", "--withhold", "input", "--copy-all"),
            2, "INVALID_ARGUMENT", None, one_of)
    refused(run, tmp_path, ("settings", "content-policy", "--inherit"), 2, "INVALID_ARGUMENT",
            None, "--inherit drops a dataset's override: name it with --dataset")
    refused(run, tmp_path, ("settings", "content-policy", "--withhold", "secrets"), 2,
            "INVALID_ARGUMENT", None, "unknown content class 'secrets'; accepted: input, "
            "output, tool_arguments, tool_results, metadata")
    # the preview names the withheld classes per case, the frozen case too
    path = subjects_file(tmp_path, subject("r-1", reviewed["r-1"]))
    p = ok_json(run("--json", "promote", "evals", "--file", path, "--idempotency-key", "k"))
    [cid] = p["proposed"]["added"]
    assert p["withheld"] == {cid: ["input", "tool_results"]}
    r = run("promote", "evals", "--file", path, "--idempotency-key", "k")
    assert r.stdout.splitlines()[1].split() == ["CASE", "RUN", "TENANT", "OUTCOME", "WITHHELD"]
    assert r.stdout.splitlines()[2].split() == ["+", cid, "r-1", "acme", "success", "input,",
                                                "tool_results"]
    seal(run, p["confirm_token"])
    case = ok_json(run("--json", "case", "evals", "1", cid))
    assert case["withheld"] == ["input", "tool_results"] and case["input"] is None
    assert all("result" not in s for s in case["steps"] if s["type"] == "tool_call")
    assert case["output"] == "done 1" and case["run_id"] == "r-1"
    r = run("--json", "settings", "content-policy", "--copy-all")
    assert ok_json(r)["withheld"] == [] and ok_json(r)["revision"] == 2


def test_cli_per_dataset_policy(run):
    assert run("init").exit_code == 0
    assert run("dataset", "create", "a").exit_code == 0
    r = run("settings", "content-policy", "--dataset", "a", "--withhold", "input")
    assert r.stdout == "settings revision 1 (a): withheld input\n"
    r = run("settings", "show", "--dataset", "a")
    assert r.stdout.splitlines()[:3] == [
        "content policy of a: its own override, settings revision 1",
        "copied: output, tool_arguments, tool_results, metadata", "withheld: input"]
    assert run("dataset", "show", "a").stdout.splitlines()[2] == (
        "  content policy: withholds input (its own override, settings revision 1)")
    r = run("settings", "content-policy", "--dataset", "a", "--inherit")
    assert r.stdout == "settings revision 2 (a): follows the repository default\n"
    data = json.loads(run("--json", "settings", "show", "--dataset", "a").stdout)
    assert (data["dataset"], data["overridden"], data["withheld"], data["revision"]) == (
        "a", False, [], 0)
    shown = json.loads(run("--json", "dataset", "show", "a").stdout)
    assert shown["content_policy"] == {"withheld": [], "overridden": False, "revision": 0}


def test_settings_eligibility_accept_adds_only_replaces_and_reviewers(run, tmp_path):
    assert run("init").exit_code == 0
    assert run("settings", "eligibility", "--accept", "gold").stdout == (
        "eligibility revision 1: dataset_eligibility = accepted or gold or reviewed\n")
    assert run("settings", "eligibility", "--accept", "gold", "--only").stdout == (
        "eligibility revision 2: dataset_eligibility = gold\n")
    assert run("settings", "eligibility", "--metric", "triage", "--accept", "keep").stdout == (
        "eligibility revision 3: triage = keep\n")
    assert run("settings", "eligibility", "--reviewers", "3", "--rule", "majority").stdout == (
        "eligibility revision 4: 3 reviewers (majority): triage = keep\n")
    assert run("settings", "show").stdout.splitlines()[-1] == (
        "promotion needs: triage = keep from 3 reviewers (majority)")
    refused(run, tmp_path, ("settings", "eligibility"), 2, "INVALID_ARGUMENT", None,
            "give --accept LABEL, --metric, --reviewers K or --rule (see `cas settings show` "
            "for the rule in force)")
    refused(run, tmp_path, ("settings", "eligibility", "--metric", "tone"), 2,
            "INVALID_ARGUMENT", None,
            "a new metric needs its accepted labels: --metric tone --accept LABEL ...")
    r = run("settings", "eligibility", "--reviewers", "0")
    assert r.exit_code == 2 and "0 is not in the range 1<=x<=100" in r.stderr
    assert ok_json(run("--json", "settings", "metrics")) == {"revision": 0,
                                                              "declared_only": False}
    assert ok_json(run("--json", "settings", "metrics", "--declared-only"))["declared_only"]
    assert run("settings", "metrics", "--any-metric").stdout == (
        "metrics revision 2: a judgment on an undeclared metric is saved with a warning naming "
        "the closest declared metric\n")

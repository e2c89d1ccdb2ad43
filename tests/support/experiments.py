"""A dataset with two recorded experiments over one version (the web's experiments and case
pages): `evals@1` of 12 direct cases (their runs r-0 ... r-12 recorded too), `baseline` and
`candidate` suite runs recorded with their results, scored on `exact` (pass/fail) and
`quality` (a number), the candidate better on most cases and worse on two; `evals@2` adds a
case and a third, score-only experiment."""

from __future__ import annotations

import cas
from cas.evals.suites.executors import Run
from cas.evals.suites.files import from_version
from cas.evals.suites.recording import record, record_scores_of
from cas.evals.suites.runner import SuiteRunner
from cas.storage.backends.memory import MemoryBackend
from support.lifecycle import run_obj

ADA = "Ada <ada@example.com>"
CASES = 12
WORSE = (3, 7)  # the cases the candidate answers worse


def case(i: int, outcome=None) -> dict:
    return {"run_id": f"r-{i}", "tenant": "acme", "input": {"task": f"t{i}"},
            "output": f"done {i}", "outcome": outcome or {"status": "success"}, "steps": []}


def scored_repo(outcomes=None) -> tuple[cas.Repository, list[str]]:
    """The repository and the case ids of evals@1, the case of r-i at index i."""
    repo = cas.Repository.create(MemoryBackend())
    repo.import_runs([run_obj(f"r-{i}", i) for i in range(CASES + 1)], author=ADA)
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, author=ADA,
                add=[case(i, (outcomes or {}).get(i)) for i in range(CASES)])
    suite = from_version(repo, "evals", 1)
    index = {c.id: int(c.input["task"][1:]) for c in suite.cases}

    def agent(better: bool):
        async def answer(c, *, run_id):
            i = index[c.id]
            good = (i not in WORSE) if better else i % 3 == 0
            return Run(f"answer {i} {'right' if good else 'wrong'}", c.tenant)
        return answer

    def scorer(c, a):
        right = a.endswith("right")
        return {"exact": right, "quality": round(0.9 if right else 0.2 + index[c.id] / 100, 3)}
    for name, better in (("baseline", False), ("candidate", True)):
        record(repo, SuiteRunner(agent(better), scorer=scorer).run(suite), name, author=ADA)
    repo.commit("evals", base=1, add=[case(CASES)], author=ADA)
    pin2 = str(repo.pin("evals", 2))
    record_scores_of(repo, pin2, "later", [{"metric": "quality", "value": 0.5, "item": c}
                                           for c in repo.items("evals", 2).items], author=ADA)
    return repo, sorted(index, key=index.get)

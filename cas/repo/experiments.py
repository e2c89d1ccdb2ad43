"""Experiments: named runs of evaluations over an exact version, whose scores cite that version
(`datasets/<name>/experiments/<n>`, a citation log; names unique per dataset)."""

from __future__ import annotations

from cas.errors import AlreadyExists, FailedPrecondition, NotFound
from cas.format.records import Experiment
from cas.format.version_names import Pin
from cas.repo import checks, datasets
from cas.repo.citations import CITING, check_not_deleted, claim, read_log
from cas.repo.retirement import active


def create_experiment(ctx, name: str, version: int, experiment_name: str,
                      author: str | None = None) -> Experiment:
    """A named experiment over the ACTIVE version `name@version` (names unique per dataset)."""
    author, now = checks.author(author), ctx.clock()
    experiment_name = checks.label(experiment_name, "experiment name")
    record = active(ctx, name, version, CITING)
    seen: dict[str, Experiment] = {}
    last = 0

    def check(head: int) -> None:
        nonlocal last
        for n, _, entry in read_log(ctx, name, "experiments", last):
            last = n
            if isinstance(entry, Experiment):
                seen[entry.name] = entry
        if experiment_name in seen:
            prior = seen[experiment_name]
            raise AlreadyExists(f"dataset {name!r} already has an experiment named "
                                f"{experiment_name!r} (over {name}@{prior.version})",
                                reason="EXPERIMENT_EXISTS", dataset=name,
                                experiment=experiment_name)
        check_not_deleted(ctx, name, version)

    def make(n: int) -> Experiment:
        return Experiment(dataset=name, number=n, name=experiment_name, version=version,
                          content_digest=record.content_digest, author=author, created_at=now)

    number, _ = claim(ctx, name, "experiments", make, check)
    return make(number)


def experiments(ctx, name: str) -> list[Experiment]:
    """The experiments of a dataset, in the order created."""
    datasets.dataset(ctx, name)
    return [e for _, _, e in read_log(ctx, name, "experiments") if isinstance(e, Experiment)]


def check_version(experiment: Experiment, version: int) -> Experiment:
    """`experiment`, refused (EXPERIMENT_VERSION_MISMATCH) unless it is over `version`: the
    scores of an experiment cite the version it is over."""
    if experiment.version != version:
        raise FailedPrecondition(
            f"experiment {experiment.name!r} is over {experiment.dataset}@{experiment.version}, "
            f"not {experiment.dataset}@{version}; its scores must cite that version",
            reason="EXPERIMENT_VERSION_MISMATCH", experiment=experiment.name,
            version=experiment.version)
    return experiment


def check_scored(ctx, p: Pin, names: set[str]) -> None:
    """Every experiment that scores citing `p` name exists and is over the version they cite."""
    if not names:
        return
    known = {e.name: e for e in experiments(ctx, p.dataset)}
    for name in sorted(names):
        if name not in known:
            raise NotFound(f"dataset {p.dataset!r} has no experiment {name!r} (create it "
                           "first with `cas experiment create`)",
                           reason="EXPERIMENT_NOT_FOUND", dataset=p.dataset, experiment=name)
        check_version(known[name], p.version)

"""`cas settings ...`: the content policy and the rule that admits a run to promotion."""

from __future__ import annotations

import click

from .common import Example, Invocation, json_option, pass_ctx, policy_source, to_json


@click.group()
@json_option
def settings() -> None:
    """Repository settings: which content classes promotion may copy into cases (a default
    and per-dataset overrides), and which judgment admits a run to promotion."""


@settings.command("show")
@click.option("--dataset", "dataset_name", default=None, metavar="NAME",
              help="The content policy in force for this dataset (its override, else the "
                   "repository default).")
@json_option
@pass_ctx
def settings_show(ctx: Invocation, dataset_name: str | None) -> None:
    """Show the content policy (every class is copied unless withheld) and which judgment
    admits a run to promotion."""
    from cas.format.projection import CONTENT_CLASSES
    repo = ctx.repo()
    policy, rule = repo.content_policy(dataset_name), repo.eligibility()
    withheld = policy.withheld
    eligibility = {"revision": rule.revision, "metric": rule.metric, "accepted": rule.accepted}
    if rule.quorum > 1 or rule.agreement_rule != "unanimous":
        eligibility.update(reviewers=rule.quorum, rule=rule.agreement_rule)
    ctx.emit({"revision": policy.source.revision if policy.source else 0,
              "dataset": dataset_name, "overridden": policy.overridden, "withheld": withheld,
              "copied": [c for c in CONTENT_CLASSES if c not in withheld],
              "eligibility": eligibility},
             (f"content policy of {dataset_name}: {policy_source(policy)}\n"
              if dataset_name else "") +
             f"copied: {', '.join(c for c in CONTENT_CLASSES if c not in withheld) or '-'}\n"
             f"withheld: {', '.join(withheld) or '-'}\n"
             f"promotion needs: {rule.metric} = {' or '.join(rule.accepted)}"
             + (f" from {rule.quorum} reviewers ({rule.agreement_rule})"
                if "reviewers" in eligibility else ""))


@settings.command("eligibility")
@click.option("--metric", default=None,
              help="The metric a judgment that admits a run is on (default: the one in force, "
                   "dataset_eligibility unless set).")
@click.option("--accept", "accepted", multiple=True, metavar="LABEL",
              help="A label that admits a run (repeatable): added to the accepted labels and "
                   "to the metric's declared labels.")
@click.option("--only", is_flag=True,
              help="The labels given by --accept replace the accepted labels (a new --metric "
                   "always starts from those given).")
@click.option("--reviewers", type=click.IntRange(1, 100), default=None, metavar="K",
              help="How many different reviewers' newest judgments must accept a run.")
@click.option("--rule", type=click.Choice(["unanimous", "majority"]), default=None,
              help="unanimous: no reviewer's newest judgment rejects the run; majority: the "
                   "accepting ones outnumber the rejecting ones.")
@json_option
@pass_ctx
def settings_eligibility(ctx: Invocation, metric: str | None, accepted: tuple[str, ...],
                         only: bool, reviewers: int | None, rule: str | None) -> None:
    """Set which judgments admit a run to promotion: K different reviewers' newest judgments
    on METRIC with an accepted label (K = 1: the newest judgment by anyone), under RULE."""
    from cas.errors import InvalidArgument
    repo = ctx.repo()
    current = repo.eligibility()
    if not (accepted or metric or reviewers or rule):
        raise InvalidArgument("give --accept LABEL, --metric, --reviewers K or --rule "
                              "(see `cas settings show` for the rule in force)")
    if metric is not None and metric != current.metric and not accepted:
        raise InvalidArgument(f"a new metric needs its accepted labels: --metric {metric} "
                              "--accept LABEL ...")
    labels = None
    if accepted:
        fresh = only or (metric is not None and metric != current.metric)
        labels = list(accepted) if fresh else sorted(set(current.accepted) | set(accepted))
    rule_ = repo.set_eligibility(metric, labels, reviewers=reviewers, rule=rule)
    needs = (f"{rule_.quorum} reviewers ({rule_.agreement_rule}): "
             if rule_.quorum > 1 or rule_.agreement_rule != "unanimous" else "")
    ctx.emit(to_json(rule_), f"eligibility revision {rule_.revision}: {needs}{rule_.metric} = "
                             f"{' or '.join(rule_.accepted)}")


@settings.command("metrics")
@click.option("--declared-only/--any-metric", "declared_only", default=None,
              help="Refuse judgments on undeclared metrics, or save them with a warning (the "
                   "default).")
@json_option
@pass_ctx
def settings_metrics(ctx: Invocation, declared_only: bool | None) -> None:
    """Whether a judgment on an undeclared metric is refused; without an option, show it."""
    repo = ctx.repo()
    record = repo.metrics() if declared_only is None else repo.set_declared_only(declared_only)
    says = ("refused" if record.declared_only else "saved with a warning naming the closest "
            "declared metric")
    ctx.emit({"revision": record.revision, "declared_only": record.declared_only},
             f"metrics revision {record.revision}: a judgment on an undeclared metric is {says}")


@settings.command("content-policy")
@click.option("--dataset", "dataset_name", default=None, metavar="NAME",
              help="Set this dataset's override instead of the repository default.")
@click.option("--withhold", "withheld", multiple=True, metavar="CLASS",
              help="A class not to copy (repeatable): input, output, tool_arguments, "
                   "tool_results, metadata. The set given replaces the current one.")
@click.option("--copy-all", is_flag=True, help="Withhold nothing.")
@click.option("--inherit", is_flag=True,
              help="With --dataset: drop the override; the dataset follows the default.")
@json_option
@pass_ctx
def settings_policy(ctx: Invocation, dataset_name: str | None, withheld: tuple[str, ...],
                    copy_all: bool, inherit: bool) -> None:
    """Set which content classes are withheld from cases frozen from now on: the repository
    default, or one dataset's override (two datasets promoted at the same time each use
    their own)."""
    from cas.errors import InvalidArgument
    if (bool(withheld), copy_all, inherit).count(True) != 1:
        raise InvalidArgument("give one of --withhold CLASS (repeatable), --copy-all or "
                              "--inherit (with --dataset)")
    if inherit and dataset_name is None:
        raise InvalidArgument("--inherit drops a dataset's override: name it with --dataset")
    record = ctx.repo().set_content_policy(
        None if inherit else ([] if copy_all else list(withheld)), dataset=dataset_name)
    what = "" if dataset_name is None else f" ({dataset_name})"
    says = ("follows the repository default" if record.withheld is None else
            f"withheld {', '.join(record.withheld) or 'nothing'}")
    ctx.emit(to_json(record), f"settings revision {record.revision}{what}: {says}")


EXAMPLES = {
    "settings": (
        Example("cas settings show",
                "What promotion copies into cases, what it withholds, and what it needs."),
        Example("cas settings content-policy --withhold tool_results",
                "Withhold tool results from the cases frozen from now on."),
    ),
    "settings show": (
        Example("cas settings show",
                "The content classes copied and withheld, and what promotion needs."),
    ),
    "settings eligibility": (
        Example("cas settings eligibility --accept gold",
                "Also admit runs judged gold (it joins the metric's labels too)."),
        Example("cas settings eligibility --metric triage --accept keep --accept gold",
                "Gate promotion on the metric triage instead: either label admits a run."),
        Example("cas settings eligibility --reviewers 2 --rule unanimous",
                "A run needs two reviewers' accepting judgments, and no rejecting one."),
    ),
    "settings metrics": (
        Example("cas settings metrics --declared-only",
                "Refuse judgments on metrics nobody declared (review metric define)."),
        Example("cas settings metrics", "Whether undeclared metrics are refused."),
    ),
    "settings content-policy": (
        Example("cas settings content-policy --withhold input --withhold tool_results",
                "Do not copy user input or tool results into cases frozen from now on."),
        Example("cas settings content-policy --copy-all", "Copy every content class again."),
        Example("cas settings content-policy --dataset support-evals --withhold tool_arguments",
                "Withhold tool arguments from the cases of support-evals only."),
    ),
}

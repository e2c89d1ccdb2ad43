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
    ctx.emit({"revision": policy.source.revision if policy.source else 0,
              "dataset": dataset_name, "overridden": policy.overridden, "withheld": withheld,
              "copied": [c for c in CONTENT_CLASSES if c not in withheld],
              "eligibility": {"revision": rule.revision, "metric": rule.metric,
                              "accepted": rule.accepted}},
             (f"content policy of {dataset_name}: {policy_source(policy)}\n"
              if dataset_name else "") +
             f"copied: {', '.join(c for c in CONTENT_CLASSES if c not in withheld) or '-'}\n"
             f"withheld: {', '.join(withheld) or '-'}\n"
             f"promotion needs: {rule.metric} = {' or '.join(rule.accepted)}")


@settings.command("eligibility")
@click.option("--metric", default="dataset_eligibility", show_default=True,
              help="The metric a judgment that admits a run is on.")
@click.option("--accept", "accepted", multiple=True, required=True, metavar="LABEL",
              help="A label that admits a run (repeatable).")
@json_option
@pass_ctx
def settings_eligibility(ctx: Invocation, metric: str, accepted: tuple[str, ...]) -> None:
    """Set which judgment admits a run to promotion: one on METRIC with an accepted label,
    not superseded by a newer judgment on METRIC that is not accepted."""
    rule = ctx.repo().set_eligibility(metric, list(accepted))
    ctx.emit(to_json(rule), f"eligibility revision {rule.revision}: {rule.metric} = "
                            f"{' or '.join(rule.accepted)}")


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
        Example("cas settings eligibility --accept reviewed",
                "Admit runs to promotion that are judged reviewed on dataset_eligibility."),
        Example("cas settings eligibility --metric triage --accept keep --accept gold",
                "Gate promotion on the metric triage instead: either label admits a run."),
    ),
    "settings content-policy": (
        Example("cas settings content-policy --withhold input --withhold tool_results",
                "Do not copy user input or tool results into cases frozen from now on."),
        Example("cas settings content-policy --copy-all", "Copy every content class again."),
        Example("cas settings content-policy --dataset support-evals --withhold tool_arguments",
                "Withhold tool arguments from the cases of support-evals only."),
    ),
}

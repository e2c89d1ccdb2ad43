"""`cas serve`: the review page for reviewers who do not use the command line (docs/web.md)."""

from __future__ import annotations

import click

from .common import INTEGER, Context, pass_ctx


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on (loopback: only this machine can connect).")
@click.option("--port", type=INTEGER, default=8300, show_default=True, help="The port.")
@pass_ctx
def serve(ctx: Context, host: str, port: int) -> None:
    """Serve the review page: the queue, transcripts and judgments, datasets and versions,
    promotion. Judgments are saved as the configured person (`cas config`)."""
    from cas.errors import InvalidArgument
    from cas.repo.userconfig import configured_person
    try:
        import uvicorn
        from cas_web.app import create_app
    except ImportError as exc:
        raise InvalidArgument(f"cas serve needs the web extra ({exc.name} is missing): "
                              "pip install 'cas-datasets[web]'") from None
    if not 0 < port < 65536:
        raise InvalidArgument(f"--port must be from 1 to 65535, not {port}")
    repo = ctx.repo()
    reviewer = configured_person()
    click.echo(f"serving {repo.location} at http://{host}:{port}/ "
               + (f"(judging as {reviewer})" if reviewer else
                  "(no reviewer configured: read only)"), err=True)
    uvicorn.run(create_app(repo, reviewer, host, port), host=host, port=port,
                log_level="warning")


COMMANDS = (serve,)  # registered on the root group by cli/main.py

"""The plain commands of "Runs and reviews": `cas status`, `cas config`, `cas serve`."""

from __future__ import annotations

import socket

import click

from .common import INTEGER, Example, Invocation, json_option, pass_ctx


@click.command()
@click.option("--metric", default="dataset_eligibility", show_default=True,
              help="The judgment a run awaits.")
@json_option
@pass_ctx
def status(ctx: Invocation, metric: str) -> None:
    """Staged proposals nobody sealed, runs awaiting review, erasures not finished."""
    s = ctx.repo().status(metric)

    def human() -> str:
        lines = [f"staged proposals not sealed: {len(s['staged_proposals'])}"]
        lines += [f"  {p['dataset']}: {p['operation']} on v{p['base']} by {p['author']} "
                  f"({p['confirm_token']})" for p in s["staged_proposals"]]
        lines.append(f"runs awaiting review ({metric}): {s['runs_awaiting_review']}")
        lines += [f"  {r}" for r in s["first_runs_awaiting_review"]]
        lines.append(f"erasures not finished: {len(s['pending_erasures'])}")
        lines += [f"  {e}" for e in s["pending_erasures"]]
        return "\n".join(lines)
    ctx.emit(s, human)


@click.command("config")
@click.argument("key")
@click.argument("value", required=False)
@json_option
@pass_ctx
def config(ctx: Invocation, key: str, value: str | None) -> None:
    """Read or set who you are: user.name, user.email (kept outside any repository)."""
    from cas.repo import userconfig
    if value is not None:
        userconfig.set_value(key, value)
    current = userconfig.get(key)
    ctx.emit({"key": key, "value": current}, current or "")
    if current is None and value is None and not ctx.as_json:
        raise SystemExit(1)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on (loopback: only this machine can connect).")
@click.option("--port", type=INTEGER, default=8300, show_default=True, help="The port.")
@json_option
@pass_ctx
def serve(ctx: Invocation, host: str, port: int) -> None:
    """Serve the review page: the queue, transcripts and judgments, datasets and versions,
    promotion. Judgments are saved as the configured person (`cas config`). With --json, one
    line {"url", "host", "port", "repository", "reviewer"} on stdout once it listens."""
    from cas.errors import InvalidArgument
    from cas.repo.userconfig import configured_person
    try:
        import uvicorn

        from cas_web.app import create_app
    except ImportError as exc:
        raise InvalidArgument(f"cas serve needs the `web` extra ({exc.name} is missing): "
                              "pip install '.[web]' in the cas checkout") from None
    if not 0 < port < 65536:
        raise InvalidArgument(f"--port must be from 1 to 65535, not {port}")
    repo = ctx.repo()
    reviewer = configured_person()
    app = create_app(repo, reviewer, host, port)
    # the socket is bound here, before anything is said, so that the JSON line (or the stderr
    # line) is printed only once a client can connect, and a port in use is a typed refusal
    sock = _listen(host, port)
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}/"
    ctx.emit({"url": url, "host": host, "port": port, "repository": str(repo.location),
              "reviewer": reviewer})  # --json only: stdout is that one line, nothing else
    if not ctx.as_json:
        click.echo(f"serving {repo.location} at {url} "
                   + (f"(judging as {reviewer})" if reviewer else
                      "(no reviewer configured: read only)"), err=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port, or Unavailable naming why not (in use, no such
    address)."""
    from cas.errors import Unavailable
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(info[0], socket.SOCK_STREAM)
    except OSError as exc:
        raise Unavailable(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                          reason="LISTEN_FAILED", host=host, port=port) from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(info[4])
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise Unavailable(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                          reason="LISTEN_FAILED", host=host, port=port) from None
    return sock


EXAMPLES = {
    "status": (
        Example("cas status", "Unsealed proposals, runs awaiting review and unfinished erasures."),
        Example("cas status --metric tone", "The same, counting the runs not yet judged on tone."),
    ),
    "config": (
        Example('cas config user.name "Ada Lovelace"', "Say who you are (reviews need it)."),
        Example("cas config user.email ada@example.com", "Set your email."),
        Example("cas config user.name", "Print the name (exit 1 when it is not set)."),
    ),
    "serve": (
        Example("cas serve",
                "Serve the review page at http://127.0.0.1:8300/ (this machine only)."),
        Example("cas --repo /srv/evals serve --port 8400",
                "Serve another repository's page on port 8400."),
    ),
}

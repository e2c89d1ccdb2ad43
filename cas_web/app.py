"""The review page: server-rendered HTML over `cas.Repository`, implementing no rule itself.

Every state change is a POST carrying the server's token (CSRF); a request whose Host header
is not the address the server was bound to is refused (DNS rebinding); every value from a run
is escaped by the templates (autoescape); no page shows a person id.
"""

from __future__ import annotations

import ipaddress
import pathlib
import secrets
from typing import Any
from urllib.parse import quote, urlencode

import msgspec
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from cas.errors import CasError, FailedPrecondition, InvalidArgument
from cas.format.encoding import encode
from cas.format.transcript import transcript
from cas.repo.repository import Repository

TEMPLATES = pathlib.Path(__file__).parent / "templates"
PAGE = 50  # rows per page of the queue, of a version's cases and of a diff
PROMOTE_ROWS = 200  # accepted runs shown to choose from (all of them can be staged at once)
STATUS = {"INVALID_ARGUMENT": 400, "NOT_FOUND": 404, "ALREADY_EXISTS": 409,
          "FAILED_PRECONDITION": 409, "ABORTED": 409, "DATA_LOSS": 500, "UNAVAILABLE": 503,
          "PERMISSION_DENIED": 403}


def allowed_hosts(host: str, port: int) -> set[str]:
    """The Host header values a server bound to `host:port` answers: on loopback,
    127.0.0.1 and localhost with the port; else the bound address with the port."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    names = {"127.0.0.1", "localhost"} if loopback else {host}
    return {f"{name}:{port}" for name in names}


class ReviewApp:
    """The routes of one server: its repository, its reviewer, its token and its hosts."""

    def __init__(self, repo: Repository, reviewer: str | None, host: str, port: int):
        self.repo = repo
        self.reviewer = reviewer
        self.token = secrets.token_urlsafe(32)
        self.hosts = allowed_hosts(host, port)
        self.env = Environment(loader=FileSystemLoader(TEMPLATES),
                               autoescape=select_autoescape(["html"], default=True),
                               trim_blocks=True, lstrip_blocks=True)
        self.env.globals.update(url=_url, path=_path,
                                kind_of=lambda e: type(e).__struct_config__.tag)

    # -- plumbing ---------------------------------------------------------------------------
    def render(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = self.env.get_template(template).render(csrf=self.token, reviewer=self.reviewer,
                                                  **values)
        return HTMLResponse(html, status_code=status)

    async def guard(self, request: Request) -> Response | None:
        """None if the request may go on, else the refusal."""
        if request.headers.get("host") not in self.hosts:
            return PlainTextResponse(
                f"refused: Host {request.headers.get('host')!r} is not this server's address "
                f"({', '.join(sorted(self.hosts))})", status_code=421)
        if request.method == "POST":
            form = await request.form()
            if not secrets.compare_digest(str(form.get("csrf", "")), self.token):
                return PlainTextResponse("refused: a change needs this page's token (reload "
                                         "the page and try again)", status_code=403)
        return None

    def route(self, handler):
        async def endpoint(request: Request) -> Response:
            refused = await self.guard(request)
            if refused is not None:
                return refused
            try:
                return await handler(request)
            except CasError as exc:
                return self.render("error.html", STATUS.get(exc.code, 500), error=exc)
        return endpoint

    # -- queue and judgment -----------------------------------------------------------------
    async def queue(self, request: Request) -> Response:
        q = request.query_params
        metric = q.get("metric") or self.repo.eligibility().metric
        filters = {"tenant": q.get("tenant") or None, "since": q.get("since") or None}
        page = self.repo.review_queue(metric=metric, cursor=q.get("cursor") or None,
                                      limit=PAGE, **filters)
        more = None if page.next_cursor is None else _url(
            "/queue", metric=metric, cursor=page.next_cursor, **filters)
        return self.render("queue.html", runs=page.runs, metric=metric, more=more,
                           undated=page.undated, **filters)

    async def run(self, request: Request) -> Response:
        run_id = _run_id(request.query_params.get("id"))
        run = self.repo.run(run_id)
        return self.render("run.html", run_id=run_id, t=transcript(run),
                           reviews=self.repo.reviews(run_id),
                           rule=self.repo.eligibility(),
                           saved=request.query_params.get("saved"))

    async def judge(self, request: Request) -> Response:
        """GET: the preview of a judgment (stores nothing); POST: its confirmation. The run id
        travels as the `id` query parameter or form field, never in the path (see `_run_id`)."""
        form = await request.form() if request.method == "POST" else None
        run_id = _run_id((request.query_params if form is None else form).get("id"))
        if self.reviewer is None:
            raise FailedPrecondition(
                "this server has no reviewer: start `cas serve` after `cas config user.name` "
                "and `cas config user.email` (or with CAS_USER set)",
                reason="NO_CONFIGURED_PERSON")
        if request.method == "GET":
            metric, label = request.query_params.get("metric", ""), \
                request.query_params.get("label", "")
            request_ = [{"run_id": run_id, "metric": metric, "label": label}]
            preview = self.repo.add_reviews(request_, reviewer=self.reviewer)
            return self.render("judge.html", run_id=run_id, metric=metric, label=label,
                               preview=preview)
        request_ = [{"run_id": run_id, "metric": str(form.get("metric", "")),
                     "label": str(form.get("label", ""))}]
        saved = self.repo.add_reviews(request_, confirm_token=str(form.get("confirm_token")),
                                      reviewer=self.reviewer)
        if "annotation_ids" not in saved:  # the token no longer matches: preview again
            return self.render("judge.html", run_id=run_id, metric=request_[0]["metric"],
                               label=request_[0]["label"], preview=saved, changed=True)
        return RedirectResponse(_url("/run", id=run_id, saved=saved["annotation_ids"][0]),
                                status_code=303)

    # -- datasets and versions --------------------------------------------------------------
    async def datasets(self, request: Request) -> Response:
        return self.render("datasets.html", names=self.repo.datasets())

    async def dataset(self, request: Request) -> Response:
        name = request.path_params["name"]
        before = _number(request.query_params.get("before"))
        listing = self.repo.version_listing(name, before=before, limit=PAGE)
        return self.render("dataset.html", meta=self.repo.dataset(name), listing=listing,
                           policy=self.repo.content_policy(name))

    async def version(self, request: Request) -> Response:
        name, number = request.path_params["name"], _number(request.path_params["number"])
        record = self.repo.version(name, number)
        retirement = self.repo.retirement(name, number)
        values: dict[str, Any] = {"record": record, "retirement": retirement, "page": None,
                                  "pin": None, "more": None}
        if retirement is None:  # a retired version lists no case, as the API refuses to
            page = self.repo.items_detailed(name, number, after=request.query_params.get(
                "cursor") or None, limit=PAGE)
            values.update(page=page, pin=str(self.repo.pin(name, number)),
                          more=None if page.next_cursor is None else _url(
                              _path("datasets", name, "versions", number),
                              cursor=page.next_cursor))
        values["scores"] = self.repo.scores(name, number)
        values["experiments"] = [e for e in self.repo.experiments(name) if e.version == number]
        return self.render("version.html", **values)

    async def case(self, request: Request) -> Response:
        name, number = request.path_params["name"], _number(request.path_params["number"])
        case_id = request.path_params["case_id"]
        case = self.repo.case(name, number, case_id)
        stored = msgspec.to_builtins(case)
        if stored.get("person") is not None:  # no page shows a person id
            stored["person"] = "(not shown)"
        text = msgspec.json.format(encode(stored), indent=2).decode()
        return self.render("case.html", name=name, number=number, case_id=case_id,
                           t=transcript(case), text=text)

    async def diff(self, request: Request) -> Response:
        name = request.path_params["name"]
        a, b = _number(request.query_params.get("a")), _number(request.query_params.get("b"))
        if a is None or b is None:
            raise InvalidArgument("a diff names two versions: ?a=N&b=M")
        page = self.repo.diff_detailed(name, a, b, cursor=request.query_params.get("cursor")
                                       or None, limit=PAGE)
        more = None if page.next_cursor is None else _url(_path("datasets", name, "diff"), a=a,
                                                            b=b, cursor=page.next_cursor)
        return self.render("diff.html", name=name, a=a, b=b, page=page, more=more)

    # -- promotion --------------------------------------------------------------------------
    async def promote(self, request: Request) -> Response:
        """GET: the accepted runs to choose from (the first PROMOTE_ROWS shown, each with a
        box); POST: stage the chosen ones, or every accepted run the filters select (a
        preview)."""
        name = request.path_params["name"]
        self.repo.dataset(name)
        if request.method == "GET":
            q = request.query_params
            filters = {"tenant": q.get("tenant") or None, "since": q.get("since") or None}
            try:
                subjects = self.repo.reviewed_subjects(**filters)
            except CasError as exc:
                if exc.reason != "NO_ACCEPTED_RUNS":
                    raise
                subjects = []
            shown = subjects[:PROMOTE_ROWS]  # only these runs are read, for their rows
            runs = [self.repo.run(s.subject_ref) for s in shown]
            return self.render("promote.html", name=name, subjects=zip(shown, runs),
                               total=len(subjects), subjects_shown=len(shown),
                               key=f"web-{secrets.token_hex(8)}",
                               **filters)
        form = await request.form()
        key = str(form.get("key", ""))
        if form.get("all"):  # every accepted run the filters select, as `promote --reviewed`
            preview = self.repo.promote_reviewed(
                name, key, tenant=str(form.get("tenant") or "") or None,
                since=str(form.get("since") or "") or None, author=self.reviewer)
        else:
            chosen = [str(r) for r in form.getlist("run")]
            if not chosen:
                raise InvalidArgument("choose at least one run to promote")
            preview = self.repo.promote_reviewed(name, key, run_ids=chosen,
                                                 author=self.reviewer)
        return self.render("preview.html", name=name, p=preview)

    async def seal(self, request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        result = self.repo.seal(name, str(form.get("confirm_token", "")),
                                author=self.reviewer, message=str(form.get("message", "")))
        if result.version is None:
            return RedirectResponse(_path("datasets", name), status_code=303)
        return RedirectResponse(_path("datasets", name, "versions", result.version.number),
                                status_code=303)

    def routes(self) -> list[Route]:
        r = self.route
        return [
            Route("/", r(self.home)),
            Route("/queue", r(self.queue)),
            Route("/run", r(self.run)),
            Route("/run/judge", r(self.judge), methods=["GET", "POST"]),
            Route("/runs/{run_id:path}", r(self.old_run)),
            Route("/datasets", r(self.datasets)),
            Route("/datasets/{name}", r(self.dataset)),
            Route("/datasets/{name}/versions/{number}", r(self.version)),
            Route("/datasets/{name}/versions/{number}/cases/{case_id}", r(self.case)),
            Route("/datasets/{name}/diff", r(self.diff)),
            Route("/datasets/{name}/promote", r(self.promote), methods=["GET", "POST"]),
            Route("/datasets/{name}/seal", r(self.seal), methods=["POST"]),
        ]

    async def home(self, request: Request) -> Response:
        return RedirectResponse("/queue", status_code=303)

    async def old_run(self, request: Request) -> Response:
        """`/runs/RUN_ID`, the address the page used before run ids moved to the query: kept
        for links written by hand, it opens the run the (decoded) rest of the path names."""
        return RedirectResponse(_url("/run", id=request.path_params["run_id"]), status_code=303)


def _url(path: str, **query: Any) -> str:
    kept = {k: v for k, v in query.items() if v is not None and v != ""}
    return f"{path}?{urlencode(kept)}" if kept else path


def _path(*segments: Any) -> str:
    """An absolute path of `segments`, each percent-quoted whole, so a `/`, `?`, `#` or `%` in
    a name stays inside its segment."""
    return "".join("/" + quote(str(s), safe="") for s in segments)


def _run_id(text: str | None) -> str:
    """The run a page names. A run id may be any printable string (docs/runs.md), `..`, `a/b`
    or `a?b#c` too: no path segment can carry every one (browsers resolve `.` and `..`
    segments, even quoted), so the page passes it as the `id` query parameter or form field."""
    if not text:
        raise InvalidArgument("name the run: /run?id=RUN_ID")
    return str(text)


def _number(text: str | None) -> int | None:
    if text is None or text == "":
        return None
    if not (text.isascii() and text.isdigit()):
        raise InvalidArgument(f"{text!r} is not a version number")
    return int(text)


def create_app(repo: Repository, reviewer: str | None, host: str = "127.0.0.1",
               port: int = 8300) -> Starlette:
    """The ASGI application of `cas serve` for `repo`, judging as `reviewer`, answering only
    requests addressed to `host:port`."""
    return Starlette(routes=ReviewApp(repo, reviewer, host, port).routes())

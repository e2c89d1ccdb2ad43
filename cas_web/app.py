"""The review page: server-rendered HTML over `cas.Repository`, implementing no rule itself.

Every state change is a POST carrying the server's token (CSRF); a request whose Host header
is not the address the server was bound to is refused (DNS rebinding); every value from a run
is escaped by the templates (autoescape); no page shows a person id. The page's only script is
the run page's keyboard handler (static, in the template): every key does what a click on a
visible control does.
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
from cas.repo.runs import summary as run_summary
from cas_web import results

TEMPLATES = pathlib.Path(__file__).parent / "templates"
PAGE = 50  # rows per page of the queue and of a diff
CASES_PAGE = 100  # cases per page of a version
KEYED_LABELS = 9  # labels the digits 1-9 choose
BRIEF_FIELDS = 3  # fields of an outcome or metadata a listing shows before "more"
BRIEF_CHARS = 60  # characters of each
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
        self.env.globals.update(url=_url, path=_path, brief=brief, pretty=pretty,
                                has_value=lambda v: v is not msgspec.UNSET,
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
    def labels(self, metric: str, seen: list[str] | tuple[str, ...] = ()) -> list[str]:
        """The labels a judgment on `metric` is offered, in order (the digits choose them): the
        metric's declared labels in declared order (the eligibility metric is always
        declared); for an undeclared metric, the labels `seen` given on it."""
        declared = self.repo.declared_metrics().get(metric)
        if declared is not None:
            return list(declared.labels)
        return list(dict.fromkeys(seen))

    def next_run(self, run_id: str, metric: str, tenant: str | None,
                 since: str | None) -> str | None:
        """The run after `run_id` in the queue (the filters its page was opened with) that
        still needs this reviewer's judgment, else the first such run that is not `run_id`;
        None when nothing else waits."""
        filters = {"metric": metric, "tenant": tenant, "since": since,
                   "mine": self.reviewer is not None, "reviewer": self.reviewer}
        try:
            after = self.repo.review_queue(cursor=run_id, limit=1, **filters).runs
        except CasError:
            after = []
        if after:
            return after[0]["run_id"]
        first = self.repo.review_queue(limit=2, **filters).runs
        return next((r["run_id"] for r in first if r["run_id"] != run_id), None)

    async def queue(self, request: Request) -> Response:
        q = request.query_params
        rule_metric = self.repo.eligibility().metric
        metric = q.get("metric") or rule_metric
        filters = {"tenant": q.get("tenant") or None, "since": q.get("since") or None}
        mine = bool(q.get("mine")) and self.reviewer is not None
        page = self.repo.review_queue(metric=metric, cursor=q.get("cursor") or None,
                                      limit=PAGE, mine=mine, reviewer=self.reviewer, **filters)
        more = None if page.next_cursor is None else _url(
            "/queue", metric=metric, cursor=page.next_cursor, mine="1" if mine else None,
            **filters)
        return self.render("queue.html", runs=page.runs, metric=metric, more=more,
                           undated=page.undated, labels=self.labels(metric)[:KEYED_LABELS],
                           judged=q.get("judged"),
                           judged_label=q.get("label"), cursor=q.get("cursor") or "",
                           rule_metric=rule_metric, mine=mine,
                           warning=self.warning(q, metric),
                           quorum=self.repo.eligibility().quorum, **filters)

    async def queue_judge(self, request: Request) -> Response:
        """POST: one label (and comment) applied to every run ticked in the queue, previewed
        and confirmed in this one request; back to the queue, which no longer lists them."""
        form = await request.form()
        self.need_reviewer()
        metric, label = str(form.get("metric", "")), str(form.get("label", ""))
        chosen = [str(r) for r in form.getlist("run")]
        if not chosen:
            raise InvalidArgument("tick at least one run to judge")
        saved = self.save([judgment(r, metric, label, str(form.get("comment", "")))
                           for r in chosen])
        return RedirectResponse(_url("/queue", metric=metric, tenant=form.get("tenant"),
                                     since=form.get("since"), cursor=form.get("cursor"),
                                     mine=form.get("mine"),
                                     judged=len(saved["annotation_ids"]), label=label,
                                     warned=_warned(saved)),
                                status_code=303)

    async def run(self, request: Request) -> Response:
        q = request.query_params
        run_id = _run_id(q.get("id"))
        run = self.repo.run(run_id)
        rule = self.repo.eligibility()
        metric = q.get("metric") or rule.metric
        filters = {"tenant": q.get("tenant") or None, "since": q.get("since") or None}
        reviews = self.repo.reviews(run_id)
        labels = self.labels(metric, [r.label for r in reviews if r.metric == metric])
        return self.render("run.html", run_id=run_id, t=transcript(run), reviews=reviews,
                           rule=rule, metric=metric, labels=labels[:KEYED_LABELS],
                           other_labels=labels[KEYED_LABELS:], filters=filters,
                           next_run=self.next_run(run_id, metric, **filters),
                           saved=q.get("saved"), judged=q.get("judged"),
                           judged_label=q.get("label"), warning=self.warning(q, metric))

    def warning(self, q, metric: str) -> str | None:
        """The warning the judgment just saved earned (`warned` in the link), as the library
        words it for its metric and label."""
        if not q.get("warned") or not metric:
            return None
        try:
            return self.repo.check_judgment(metric, q.get("label") or "")
        except CasError:
            return None

    def need_reviewer(self) -> None:
        if self.reviewer is None:
            raise FailedPrecondition(
                "this server has no reviewer: start `cas serve` after `cas config user.name` "
                "and `cas config user.email` (or with CAS_USER set)",
                reason="NO_CONFIGURED_PERSON")

    def save(self, requests: list[dict]) -> dict:
        """Judgments previewed and confirmed at once, as the library requires both: what the
        preview names is what the confirmation saves (its token), in one request of the page."""
        preview = self.repo.add_reviews(requests, reviewer=self.reviewer)
        saved = self.repo.add_reviews(requests, confirm_token=preview["confirm_token"],
                                      reviewer=self.reviewer)
        if "annotation_ids" not in saved:  # cannot happen with the preview's own token
            raise FailedPrecondition("the judgment changed between its preview and its "
                                     "confirmation; nothing was saved: try again")
        return saved

    async def judge(self, request: Request) -> Response:
        """GET: the preview of a judgment (stores nothing); POST: its confirmation, or with
        `quick` (the keyboard's form) its preview and confirmation at once, then the next run
        in the queue. The run id travels as the `id` query parameter or form field, never in
        the path (see `_run_id`)."""
        form = await request.form() if request.method == "POST" else None
        run_id = _run_id((request.query_params if form is None else form).get("id"))
        self.need_reviewer()
        if request.method == "GET":
            metric, label = request.query_params.get("metric", ""), \
                request.query_params.get("label", "")
            request_ = [judgment(run_id, metric, label,
                                 request.query_params.get("comment", ""))]
            preview = self.repo.add_reviews(request_, reviewer=self.reviewer)
            return self.render("judge.html", run_id=run_id, metric=metric, label=label,
                               comment=request.query_params.get("comment", ""),
                               preview=preview)
        metric, label = str(form.get("metric", "")), str(form.get("label", ""))
        comment = str(form.get("comment", ""))
        request_ = [judgment(run_id, metric, label, comment)]
        if form.get("quick"):
            saved = self.repo.review(run_id, metric, label, comment=request_[0].get("comment"),
                                     correction=correction(str(form.get("correction", ""))),
                                     reviewer=self.reviewer)
            filters = {"tenant": str(form.get("tenant") or "") or None,
                       "since": str(form.get("since") or "") or None}
            following = self.next_run(run_id, metric, **filters)
            ann, warned = saved["annotation_ids"][0], _warned(saved)
            if following is None:  # nothing else waits: stay on the judged run
                return RedirectResponse(_url("/run", id=run_id, metric=metric, saved=ann,
                                             label=label, warned=warned, **filters),
                                        status_code=303)
            return RedirectResponse(_url("/run", id=following, metric=metric, saved=ann,
                                         judged=run_id, label=label, warned=warned,
                                         **filters), status_code=303)
        saved = self.repo.add_reviews(request_, confirm_token=str(form.get("confirm_token")),
                                      reviewer=self.reviewer)
        if "annotation_ids" not in saved:  # the token no longer matches: preview again
            return self.render("judge.html", run_id=run_id, metric=metric, label=label,
                               comment=comment, preview=saved, changed=True)
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
                "cursor") or None, limit=CASES_PAGE)
            ids = [c.case_id for c in page.items]
            metadata = {i: c.metadata for i, c in zip(ids, self.repo.cases(name, number, ids))}
            values.update(page=page, pin=str(self.repo.pin(name, number)), metadata=metadata,
                          more=None if page.next_cursor is None else _url(
                              _path("datasets", name, "versions", number),
                              cursor=page.next_cursor))
        values["scores"] = self.repo.scores(name, number)
        values["experiments"] = [e for e in self.repo.experiments(name) if e.version == number]
        return self.render("version.html", **values)

    async def experiments(self, request: Request) -> Response:
        """A version's experiments and score batches; with `a` and `b`, those two side by
        side (charts, per-case differences, answers, the verdict)."""
        name, number = request.path_params["name"], _number(request.path_params["number"])
        record = self.repo.version(name, number)
        over = [e for e in self.repo.experiments(name) if e.version == number]
        q = request.query_params
        a, b = q.get("a") or None, q.get("b") or None
        shown = None
        if a or b:
            if not (a and b):
                raise InvalidArgument("choose two experiments to compare: ?a=NAME&b=NAME")
            names = [e.name for e in over]
            for wanted in (a, b):
                if wanted not in names and wanted in {e.name for e in self.repo.experiments(
                        name)}:
                    raise InvalidArgument(
                        f"experiment {wanted!r} is over another version of {name!r}; the "
                        f"experiments over {name}@{number}: {', '.join(names) or 'none'}",
                        reason="EXPERIMENT_VERSION_MISMATCH")
            shown = results.side_by_side(self.repo, name, number, a, b)
        return self.render("experiments.html", record=record, experiments=over,
                           batches=results.batches(self.repo.scores(name, number)),
                           a=a, b=b, shown=shown)

    async def case(self, request: Request) -> Response:
        name, number = request.path_params["name"], _number(request.path_params["number"])
        case_id = request.path_params["case_id"]
        case = self.repo.case(name, number, case_id)
        stored = msgspec.to_builtins(case)
        if stored.get("person") is not None:  # no page shows a person id
            stored["person"] = "(not shown)"
        text = msgspec.json.format(encode(stored), indent=2).decode()
        return self.render("case.html", name=name, number=number, case_id=case_id,
                           t=transcript(case), text=text,
                           scores=results.case_scores(self.repo, case_id))

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
            rows = [(run_summary(self.repo.run(s.subject_ref)), admitting(self.repo, s))
                    for s in shown]
            return self.render("promote.html", name=name, subjects=rows,
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
            Route("/queue/judge", r(self.queue_judge), methods=["POST"]),
            Route("/runs/{run_id:path}", r(self.old_run)),
            Route("/datasets", r(self.datasets)),
            Route("/datasets/{name}", r(self.dataset)),
            Route("/datasets/{name}/versions/{number}", r(self.version)),
            Route("/datasets/{name}/versions/{number}/experiments", r(self.experiments)),
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


def judgment(run_id: str, metric: str, label: str, comment: str = "") -> dict:
    """A review request of the page, with its comment when one was written (the library
    checks and scrubs it)."""
    request = {"run_id": run_id, "metric": metric, "label": label}
    if comment.strip():
        request["comment"] = comment
    return request


def admitting(repo: Repository, subject: Any) -> list:
    """The judgments that admit a promotion subject (one, or under K reviewers each of the
    K), oldest first."""
    ids = {subject.review_annotation_id, *getattr(subject, "review_annotation_ids", ())}
    return [r for r in repo.reviews(subject.subject_ref) if r.annotation_id in ids]


def correction(text: str) -> Any:
    """The correction a reviewer typed (the right output, as JSON), None when the box is
    empty; text that is not JSON is refused, naming where it stops being JSON."""
    if not text.strip():
        return None
    try:
        value = msgspec.json.decode(text.encode())
    except msgspec.DecodeError as exc:
        raise InvalidArgument(f"a correction is JSON (a quoted string for text): {exc}",
                              reason="INVALID_CORRECTION") from None
    if value is None:
        raise InvalidArgument("a correction is any JSON value but null",
                              reason="INVALID_CORRECTION")
    return value


def _warned(saved: dict) -> str | None:
    """`1` when a judgment earned a warning (an undeclared metric): the next page says it
    again from the library (never text a link carries, which anyone could write)."""
    return "1" if saved.get("warnings") else None


def pretty(value: Any) -> str:
    """A JSON value as indented JSON text (for its box that opens on demand)."""
    try:
        return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()
    except (TypeError, msgspec.EncodeError):
        return repr(value)


def brief(value: Any, fields: int = BRIEF_FIELDS, chars: int = BRIEF_CHARS) -> str:
    """A short line of a JSON value: an object's first `fields` fields, each value cut to
    `chars` characters, then how many more; any other value cut to `chars` * `fields`."""
    def cut(text: str, n: int) -> str:
        return text if len(text) <= n else text[:n - 1] + "…"

    def one(v: Any) -> str:
        return v if isinstance(v, str) else pretty_line(v)
    if isinstance(value, dict):
        parts = [f"{k}: {cut(one(v), chars)}" for k, v in list(value.items())[:fields]]
        rest = len(value) - fields
        return ", ".join(parts) + (f" … (+{rest} more)" if rest > 0 else "")
    return cut(one(value), chars * fields)


def pretty_line(value: Any) -> str:
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        return repr(value)


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

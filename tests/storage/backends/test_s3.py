"""The S3 backend against a real SeaweedFS: the backend contract, then network faults, caching
and request counts (mirroring to and from S3: tests/repo/test_mirror.py; the commands on S3:
tests/cli/test_repository.py)."""

import json

import pytest
from click.testing import CliRunner

import cas
from cas.storage.backends import backend_for
from cas.storage.backends.s3 import S3Backend, aws_settings, parse_url
from cas_cli.main import cli
from support.backend_contract import BackendContract
from support.faultproxy import FaultProxy
from support.sample_cases import tool_cases


@pytest.fixture
def make_backend(seaweed):
    return lambda: S3Backend(seaweed.url())


class TestS3Backend(BackendContract):
    """Every test of the backend contract, on an S3Backend against SeaweedFS."""

    # SeaweedFS makes same-key losers wait in whole-second steps: fewer racers, fewer rounds.
    RACERS, RACE_ROUNDS = 4, 3


@pytest.fixture
def proxied(seaweed, monkeypatch, tmp_path):
    """A repository reached through a fault-injecting proxy."""
    monkeypatch.setenv("CAS_CACHE_DIR", str(tmp_path / "cache"))
    with FaultProxy(seaweed.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        url = seaweed.url()
        repo = cas.init(url)
        repo.create_dataset("evals", admission="direct")
        yield proxy, url, repo


def test_url_and_settings_parsing(tmp_path):
    assert parse_url("s3://bucket/a/b/") == ("bucket", "a/b")
    assert parse_url("s3://bucket") == ("bucket", "")
    with pytest.raises(cas.InvalidArgument, match="s3://BUCKET/PREFIX"):
        parse_url("s3:/bucket")
    with pytest.raises(cas.InvalidArgument, match="accepted"):
        backend_for("gs://bucket/x")
    config = tmp_path / "config"
    config.write_text("[profile team]\nregion = eu-west-3\nendpoint_url = http://h:1\n")
    creds = tmp_path / "credentials"
    creds.write_text("[team]\naws_access_key_id = AK\naws_secret_access_key = SK\n")
    env = {"AWS_PROFILE": "team", "AWS_CONFIG_FILE": str(config),
           "AWS_SHARED_CREDENTIALS_FILE": str(creds)}
    assert aws_settings(env) == {"endpoint": "http://h:1", "region": "eu-west-3",
                                 "access_key_id": "AK", "secret_access_key": "SK"}
    env["AWS_REGION"] = "us-west-2"  # the environment wins over the files
    assert aws_settings(env)["region"] == "us-west-2"


def test_same_bytes_and_digests_as_a_local_repository(s3_url, tmp_path):
    local = cas.init(str(tmp_path / "local"))
    remote = cas.init(s3_url)
    for repo in (local, remote):
        repo.create_dataset("evals", admission="direct")
        repo.commit("evals", base=None, add=tool_cases(150))
    a, b = local.version("evals", 1), remote.version("evals", 1)
    assert a.content_digest == b.content_digest and a.item_count == b.item_count == 150
    assert local.items("evals", 1, limit=200) == remote.items("evals", 1, limit=200)


def test_lost_response_to_a_version_claim_is_not_reported_as_a_conflict(proxied):
    proxy, url, repo = proxied
    lost = []

    def plan(method, path, n):
        if method == "PUT" and "/versions/" in path and not lost:
            lost.append(path)
            return "lost"  # the server stored it, the client never heard
        return None
    proxy.plan = plan
    record = repo.commit("evals", base=None, add=tool_cases(3))
    assert lost and record.number == 1
    assert cas.open(url).version("evals", 1) == record
    assert cas.open(url).fsck().ok


def test_transient_errors_on_reads_and_writes_are_retried(proxied):
    proxy, url, repo = proxied
    proxy.plan = lambda method, path, n: ("503" if n % 3 == 0 else "reset" if n % 7 == 0
                                          else None)
    record = repo.commit("evals", base=None, add=tool_cases(20))
    fresh = cas.open(url)
    page = fresh.items("evals", 1, limit=50)
    # every case, in order (an empty page would be sorted too)
    assert page.items == sorted(cas.encode_case(c).case_id for c in tool_cases(20))
    assert not page.has_more
    assert fresh.version("evals", 1) == record
    assert any(f != "ok" for _, _, f in proxy.log)
    proxy.plan = lambda method, path, n: None
    assert cas.open(url).fsck().ok


def test_persistent_write_failure_is_a_clear_error_and_changes_nothing(proxied, monkeypatch):
    proxy, url, repo = proxied
    repo.commit("evals", base=None, add=tool_cases(5))
    before = sorted(S3Backend(url).list(""))
    proxy.plan = lambda method, path, n: "503" if method == "PUT" else None
    monkeypatch.setattr("cas.storage.backends.s3.BACKOFF_S", 0.001)
    runner = CliRunner()
    src = tool_cases(1, "new")[0]
    result = runner.invoke(cli, ["--repo", url, "--json", "commit", "evals", "--base", "1",
                                 "--add", "-"], input=json.dumps(src) + "\n")
    assert result.exit_code == 8, result.output
    err = json.loads(result.stderr)["error"]
    assert err["code"] == "UNAVAILABLE" and "cannot write" in err["message"]
    proxy.plan = lambda method, path, n: None
    assert sorted(S3Backend(url).list("")) == before
    assert cas.open(url).fsck().ok


def test_objects_are_cached_locally_by_digest(s3_url, tmp_path):
    repo = cas.init(s3_url)
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None, add=tool_cases(10))
    case_id = repo.items("evals", 1, limit=1).items[0]
    first = cas.open(s3_url)
    first.case("evals", 1, case_id)
    second = cas.open(s3_url)
    gets_before = second.backend.requests["GET"]
    assert second.case("evals", 1, case_id) == first.case("evals", 1, case_id)
    # only the version record and its retirement (absent) are fetched again; index, tree nodes
    # and case come from the cache
    assert second.backend.requests["GET"] - gets_before == 2
    cached = list((tmp_path / "cache").rglob(case_id[3:]))
    assert len(cached) == 1


def test_sealing_one_case_costs_a_constant_number_of_requests(s3_url):
    repo = cas.init(s3_url)
    counts = []
    for name, size in (("small", 50), ("large", 3000)):
        repo.create_dataset(name, admission="direct")
        repo.commit(name, base=None, add=tool_cases(size, name))
        fresh = cas.open(s3_url)
        fresh.backend.requests.clear()
        fresh.commit(name, base=1, add=tool_cases(1, name + "-extra"))
        counts.append(sum(fresh.backend.requests.values()))
    # a deeper tree costs a few more node reads, never a per-case cost
    assert counts[1] <= counts[0] + 8, counts
    assert counts[1] < 40, counts


def test_ingest_goes_up_in_a_few_packs(s3_url):
    repo = cas.init(s3_url)
    repo.create_dataset("evals", admission="direct")
    repo.backend.requests.clear()
    repo.commit("evals", base=None, add=tool_cases(5000))
    # the writer's lease, the pack's person-shards record, pack, index, version record
    assert repo.backend.requests["PUT"] <= 5


# -- errors are decided on status and size, never on an error's text --------------------------
def _range_backend(seaweed, endpoint):
    """A backend under a prefix with "range" in it (the client's error text holds the URL)."""
    import uuid
    env = dict(seaweed.environ(), AWS_ENDPOINT_URL=endpoint)
    return S3Backend(f"s3://{seaweed.url().split('/')[2]}/range-{uuid.uuid4().hex}", environ=env)


def test_range_past_the_end_is_empty_under_a_prefix_named_range(seaweed):
    backend = _range_backend(seaweed, seaweed.endpoint)
    data = bytes(range(200))
    assert backend.put_if_absent("packs/p.pack", data)
    assert backend.get_range("packs/p.pack", 190, 50) == data[190:]
    assert backend.get_range("packs/p.pack", 200, 10) == b""   # 416 from the server
    assert backend.get_range("packs/p.pack", 2**64 - 1, 2**32 - 1) == b""  # past any object
    with pytest.raises(cas.NotFound):
        backend.get_range("packs/range.pack", 500, 10)
    with pytest.raises(cas.NotFound):
        backend.get_range("packs/range.pack", 2**63, 10)


@pytest.mark.parametrize("fault", ["503", "reset"])
def test_outage_on_a_range_read_is_unavailable_under_a_prefix_named_range(seaweed, monkeypatch,
                                                                          fault):
    monkeypatch.setattr("cas.storage.backends.s3.READ_BACKOFF_S", 0.001)
    with FaultProxy(seaweed.endpoint) as proxy:
        backend = _range_backend(seaweed, proxy.endpoint)
        assert backend.put_if_absent("packs/p.pack", bytes(range(200)))
        proxy.plan = lambda method, path, n: fault if method in ("GET", "HEAD") else None
        for offset in (0, 150, 200, 10**6):
            with pytest.raises(cas.CasError) as info:
                backend.get_range("packs/p.pack", offset, 10)
            assert info.value.code == "UNAVAILABLE", (offset, info.value)
            assert proxy.endpoint in info.value.message
        proxy.plan = lambda method, path, n: None
        assert backend.get_range("packs/p.pack", 150, 10) == bytes(range(150, 160))


def test_a_failed_range_read_inside_the_object_is_unavailable_whatever_its_text(seaweed,
                                                                                monkeypatch):
    """Only the object's size says a range is past the end: an error that reads like a 416
    (obstore raises a 416 as a GenericError, its status only in the text) is not believed
    for a range inside the object."""
    import obstore
    from obstore.exceptions import GenericError
    backend = _range_backend(seaweed, seaweed.endpoint)
    assert backend.put_if_absent("packs/p.pack", bytes(range(200)))

    def failing(*args, **kwargs):
        raise GenericError("Server returned non-2xx status code: 416 Range Not Satisfiable")
    monkeypatch.setattr(obstore, "get_range", failing)
    with pytest.raises(cas.CasError) as info:
        backend.get_range("packs/p.pack", 150, 10)
    assert info.value.code == "UNAVAILABLE" and "416" in info.value.message
    assert backend.get_range("packs/p.pack", 200, 10) == b""  # the size says: past the end
    with pytest.raises(cas.NotFound):
        backend.get_range("packs/absent.pack", 0, 10)


def test_outage_in_a_repository_named_range_is_unavailable_not_data_loss(seaweed, monkeypatch,
                                                                         tmp_path):
    import uuid
    monkeypatch.setattr("cas.storage.backends.s3.READ_BACKOFF_S", 0.001)
    monkeypatch.setenv("CAS_CACHE_DIR", str(tmp_path / "cache"))
    with FaultProxy(seaweed.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        url = f"s3://{seaweed.url().split('/')[2]}/range-{uuid.uuid4().hex}"
        repo = cas.init(url)
        repo.create_dataset("evals", admission="direct")
        repo.commit("evals", base=None, add=tool_cases(3))
        case_id = repo.items("evals", 1, limit=1).items[0]
        monkeypatch.setenv("CAS_CACHE_DIR", str(tmp_path / "cold"))  # nothing cached
        fresh = cas.open(url)
        assert fresh.items("evals", 1, limit=5).items  # the pack index is cached now
        # only the pack is unreachable: the ranged read of the case's bytes fails
        proxy.plan = lambda method, path, n: "503" if ".pack" in path else None
        with pytest.raises(cas.CasError) as info:
            fresh.case("evals", 1, case_id)
        assert info.value.code == "UNAVAILABLE", info.value


def test_closed_port_names_the_endpoint_and_bucket(seaweed, tmp_path, monkeypatch):
    import socket
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("CAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("cas.storage.backends.s3.BACKOFF_S", 0.001)
    monkeypatch.setattr("cas.storage.backends.s3.READ_BACKOFF_S", 0.001)
    url = "s3://closed-bucket/team/evals"
    runner = CliRunner()
    for args in (["init", url], ["--repo", url, "dataset", "list"], ["--repo", url, "fsck"]):
        result = runner.invoke(cli, ["--json", *args])
        assert result.exit_code == 8, (args, result.output)
        err = json.loads(result.stderr)["error"]
        assert err["code"] == "UNAVAILABLE"
        assert endpoint in err["message"] and url in err["message"], (args, err)
        assert err["endpoint"] == endpoint and err["location"] == url
    human = runner.invoke(cli, ["init", url])
    assert human.exit_code == 8 and endpoint in human.stderr and "closed-bucket" in human.stderr


# -- a refusal is not an outage -----------------------------------------------------------------
WRONG = {"AWS_SECRET_ACCESS_KEY": "not-the-secret"}


def test_a_wrong_secret_is_permission_denied_at_once_on_every_call(seaweed):
    """A 403 (here SignatureDoesNotMatch) is PERMISSION_DENIED naming the key, the location
    and the endpoint; it is never retried: one request per call (a listing adds the HEAD that
    tells its refusal from an outage; a delete asks whether the key exists first)."""
    with FaultProxy(seaweed.endpoint) as proxy:
        env = dict(seaweed.environ(), AWS_ENDPOINT_URL=proxy.endpoint)
        url = seaweed.url()
        assert S3Backend(url, environ=env).put_if_absent("packs/p.pack", bytes(100))
        bad = S3Backend(url, environ=dict(env, **WRONG))
        calls = {"get": lambda: bad.get("packs/p.pack"),
                 "get_range": lambda: bad.get_range("packs/p.pack", 10, 5),
                 "exists": lambda: bad.exists("packs/p.pack"),
                 "modified": lambda: bad.modified("packs/p.pack"),
                 "list": lambda: list(bad.list("packs/")),
                 "put_if_absent": lambda: bad.put_if_absent("packs/q.pack", b"q"),
                 "replace": lambda: bad.replace("packs/p.pack", b"r"),
                 "delete": lambda: bad.delete("packs/p.pack")}
        errors = {}
        for name, call in calls.items():
            proxy.log.clear()
            with pytest.raises(cas.PermissionDenied) as info:
                call()
            err = errors[name] = info.value
            assert err.code == "PERMISSION_DENIED" and err.fields["status"] == 403, name
            assert (err.fields["location"], err.fields["endpoint"]) == (url, proxy.endpoint)
            assert url in err.message and proxy.endpoint in err.message, err.message
            assert err.fields["key"] in err.message and "\n" not in err.message
            assert len(proxy.log) == (2 if name == "list" else 1), (name, proxy.log)
        # an answer with a body (not a HEAD's) says which refusal
        assert "SignatureDoesNotMatch" in errors["put_if_absent"].message
        unknown = S3Backend(url, environ=dict(env, AWS_ACCESS_KEY_ID="nobody"))
        with pytest.raises(cas.PermissionDenied) as info:
            unknown.get("packs/p.pack")
        assert info.value.fields["s3_code"] == "InvalidAccessKeyId"
        assert S3Backend(url, environ=env).get("packs/p.pack") == bytes(100)  # untouched


def test_the_cli_with_a_wrong_secret_exits_9_permission_denied_after_one_request(
        seaweed, monkeypatch, tmp_path):
    monkeypatch.setenv("CAS_CACHE_DIR", str(tmp_path / "cache"))
    with FaultProxy(seaweed.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        url = seaweed.url()
        cas.init(url).create_dataset("evals", admission="direct")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", WRONG["AWS_SECRET_ACCESS_KEY"])
        with pytest.raises(cas.PermissionDenied):
            cas.open(url)
        runner = CliRunner()
        for args in (["--repo", url, "fsck"], ["--repo", url, "dataset", "list"],
                     ["init", seaweed.url()]):
            proxy.log.clear()
            result = runner.invoke(cli, ["--json", *args])
            assert result.exit_code == 9, (args, result.output)
            assert result.stdout == "" and len(proxy.log) == 1, proxy.log  # not retried
            err = json.loads(result.stderr)["error"]
            assert err["code"] == "PERMISSION_DENIED" and err["status"] == 403
            assert err["location"] in err["message"] and proxy.endpoint in err["message"]
        assert err["s3_code"] == "SignatureDoesNotMatch"  # init's PUT
        human = runner.invoke(cli, ["--repo", url, "fsck"])
        assert human.exit_code == 9
        assert human.stderr.startswith(f"cas: error: storage refused to read 'config' in {url}")

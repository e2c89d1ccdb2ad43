"""Which S3 client: sequential and concurrent conditional PUTs of 1.5 KB objects, obstore vs boto3.

Run by hand against a running S3 endpoint (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY) and a bucket: `python bench/s3_clients.py BUCKET [N]`, or with no
endpoint set it starts a private SeaweedFS (needs tests/requirements-seaweedfs.txt installed).
boto3 is not a dependency of cas: `pip install boto3` to include it.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

BODY = os.urandom(768).hex().encode()  # 1.5 KB


def rate(n: int, fn, workers: int = 1) -> float:
    keys = [f"bench/{uuid.uuid4().hex}" for _ in range(n)]
    t = time.perf_counter()
    if workers == 1:
        for k in keys:
            fn(k)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(fn, keys))
    return n / (time.perf_counter() - t)


def main() -> None:
    server = None
    if not os.environ.get("AWS_ENDPOINT_URL"):
        from support.seaweed import BUCKET, SeaweedServer
        server = SeaweedServer().start()
        os.environ.update(server.environ())
        bucket = BUCKET
    else:
        bucket = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    try:
        import obstore
        from obstore.store import S3Store
        store = S3Store(bucket, endpoint=endpoint, region="us-east-1",
                        virtual_hosted_style_request=False,
                        client_options={"allow_http": endpoint.startswith("http://")})
        put = lambda k: obstore.put(store, k, BODY, mode="create")  # noqa: E731
        print(f"obstore  sequential: {rate(n, put):8.0f} PUT/s   "
              f"32 in flight: {rate(n, put, 32):8.0f} PUT/s")
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            print("boto3    not installed (pip install boto3 to compare)")
            return
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                              config=Config(max_pool_connections=32))
        bput = lambda k: client.put_object(Bucket=bucket, Key=k, Body=BODY, IfNoneMatch="*")  # noqa: E731
        print(f"boto3    sequential: {rate(n, bput):8.0f} PUT/s   "
              f"32 in flight: {rate(n, bput, 32):8.0f} PUT/s")
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    main()

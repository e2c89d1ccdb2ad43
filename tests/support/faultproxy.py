"""An HTTP proxy in front of the S3 server that injects network faults on chosen requests."""

from __future__ import annotations

import http.client
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
       "upgrade"}


class FaultProxy:
    """`plan(method, path, n)` -> None (forward), "503" (answer 503 without forwarding),
    "reset" (drop the connection without forwarding) or "lost" (forward, then drop the
    connection so the client never sees the answer). `n` counts requests from 1."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlparse(upstream)
        self.plan = lambda method, path, n: None
        self.log: list[tuple[str, str, str]] = []
        self._n = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output quiet
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with proxy._lock:
                    proxy._n += 1
                    n = proxy._n
                fault = proxy.plan(self.command, self.path, n)
                proxy.log.append((self.command, self.path, fault or "ok"))
                if fault == "reset":
                    self._reset()
                    return
                if fault == "503":
                    msg = b"<Error><Code>SlowDown</Code></Error>"
                    self.send_response(503)
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port,
                                                  timeout=30)
                conn.putrequest(self.command, self.path, skip_host=True,
                                skip_accept_encoding=True)
                for k, v in self.headers.items():
                    if k.lower() not in HOP:
                        conn.putheader(k, v)
                conn.endheaders(body)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                if fault == "lost":
                    self._reset()
                    return
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _reset(self):
                self.close_connection = True
                try:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               b"\x01\x00\x00\x00\x00\x00\x00\x00")
                except OSError:
                    pass
                self.connection.close()

            do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FaultProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

"""Real-browser test helpers: an ASGI app served by uvicorn, and Debian's headless Chromium."""

from __future__ import annotations

import contextlib
import inspect
import os
import pathlib
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

CHROME_ARGS = (
    "--headless=new",
    # Containers and CI run as root, where Chromium refuses to start with its sandbox on.
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # No update checks, component downloads or sync: a test never talks to the internet.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # Docker's /dev/shm is 64 MB, too small for Chromium's shared memory: it crashes tabs.
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
)


def _is_factory(target: Callable[..., Any]) -> bool:
    """True for a factory taking (host, port), not an ASGI app taking (scope, receive, send)."""
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return False
    try:
        sig.bind("127.0.0.1", 0)
    except TypeError:
        return False
    try:
        sig.bind(None, None, None)
    except TypeError:
        return True
    return False


@contextlib.contextmanager
def serve(app: Callable[..., Any], host: str = "127.0.0.1", timeout: float = 10.0) -> Iterator[str]:
    """Run an ASGI app with uvicorn in a background thread and yield its base URL.

    `app` is an ASGI app, or a factory `(host, port) -> app` for an app that must know its own
    address (a Host-header check). The listening socket is bound here, before the app is built,
    and handed to uvicorn, so the port the factory sees is the port served, with no race.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
        port = sock.getsockname()[1]
        asgi = app(host, port) if _is_factory(app) else app
        server = uvicorn.Server(uvicorn.Config(asgi, host=host, port=port, log_level="warning"))
        failure: list[BaseException] = []

        def run() -> None:
            try:
                server.run(sockets=[sock])
            # uvicorn raises SystemExit when startup fails: keep it for the waiting thread.
            except BaseException as exc:  # noqa: BLE001
                failure.append(exc)

        thread = threading.Thread(target=run, name=f"uvicorn-{port}", daemon=True)
        thread.start()
        try:
            _wait_until_serving(server, thread, failure, host, port, timeout)
            yield f"http://{host}:{port}"
        finally:
            server.should_exit = True
            thread.join(timeout)
            if thread.is_alive():
                # A connection that will not close (a stuck handler): stop without waiting for it.
                server.force_exit = True
                thread.join(timeout)
            if thread.is_alive():
                raise RuntimeError(f"uvicorn on {host}:{port} did not stop within {2 * timeout}s")
    finally:
        sock.close()


def _wait_until_serving(server: uvicorn.Server, thread: threading.Thread,
                        failure: list[BaseException], host: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not thread.is_alive():
            cause = failure[0] if failure else None
            raise RuntimeError(f"uvicorn on {host}:{port} stopped during startup "
                               f"(see the log above): {cause!r}") from cause
        if server.started:
            try:
                with socket.create_connection((host, port), timeout=1.0):
                    return
            except OSError:
                pass
        time.sleep(0.02)
    raise TimeoutError(f"uvicorn on {host}:{port} did not accept connections within {timeout}s")


@contextlib.contextmanager
def chrome(downloads: str | os.PathLike[str] | None = None) -> Iterator[webdriver.Chrome]:
    """Yield a headless Chromium driven by chromedriver, with a fresh profile removed on exit.

    Files the page downloads land in `downloads` (created if absent), or when it is None in a
    directory inside the temporary profile, so a test never writes into the home directory.
    """
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        # Fail, never skip: the README's test command installs them, so absence is a broken setup.
        raise RuntimeError(f"{' and '.join(missing)} missing: run `sh tests/install-chromium.sh` "
                           "(installs Debian's chromium and chromium-driver)")
    profile = tempfile.mkdtemp(prefix="cas-chromium-")
    try:
        target = pathlib.Path(downloads or pathlib.Path(profile, "downloads"))
        target.mkdir(parents=True, exist_ok=True)
        options = Options()
        options.binary_location = CHROMIUM
        for arg in CHROME_ARGS:
            options.add_argument(arg)
        options.add_argument(f"--user-data-dir={profile}/profile")
        options.add_experimental_option("prefs", {
            "download.default_directory": str(target.resolve()),
            "download.prompt_for_download": False,
            "download.directory_upgrade": True,
        })
        # An explicit driver path: Selenium Manager (which may go to the network) is never run.
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        try:
            yield driver
        finally:
            driver.quit()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


_scratch: pathlib.Path | None = None


def screenshot(driver: webdriver.Chrome, name: str) -> pathlib.Path:
    """Save a PNG of the page as `<name>.png` in $CAS_SCREENSHOTS, else in a temporary directory."""
    global _scratch
    if not name or "/" in name or os.sep in name or name.startswith("."):
        raise ValueError(f"screenshot name must be a plain file name, got {name!r}")
    where = os.environ.get("CAS_SCREENSHOTS")
    if where:
        folder = pathlib.Path(where)
        folder.mkdir(parents=True, exist_ok=True)
    else:
        if _scratch is None:
            _scratch = pathlib.Path(tempfile.mkdtemp(prefix="cas-screenshots-"))
        folder = _scratch
    path = folder / f"{name}.png"
    if not driver.save_screenshot(str(path)):
        raise RuntimeError(f"Chromium could not save a screenshot to {path}")
    return path

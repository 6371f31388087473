"""A headless Chromium driven over the DevTools protocol (`websockets`' sync client): open a
page, wait for the viewer to be ready, run JavaScript, take screenshots, catch downloads and
the page's uncaught errors. Used by the viewer tests and benchmarks/viewer_scale.py."""

from __future__ import annotations

import base64
import itertools
import json
import socket
import subprocess
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

# The viewer sets data-ready on <html> once the page is drawn.
READY = "!!document.documentElement && document.documentElement.getAttribute('data-ready') === '1'"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Chromium:
    def __init__(self, binary: str, profile: Path, downloads: Path | None = None) -> None:
        port = _free_port()
        self.process = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                f"--remote-debugging-port={port}",
                "--remote-allow-origins=*",
                f"--user-data-dir={profile}",
                "--window-size=1280,1400",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.errors: list[str] = []
        self._ids = itertools.count(1)
        self._stack = ExitStack()
        self.socket = self._stack.enter_context(
            connect(self._page_socket(port), max_size=None, open_timeout=30)
        )
        self.send("Page.enable")
        self.send("Runtime.enable")
        if downloads is not None:
            downloads.mkdir(parents=True, exist_ok=True)
            self.send("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(downloads))

    def _page_socket(self, port: int) -> str:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                    pages = [t for t in json.load(r) if t["type"] == "page"]
                if pages:
                    return pages[0]["webSocketDebuggerUrl"]
            except OSError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        message_id = next(self._ids)
        self.socket.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=60))
            if message.get("method") == "Runtime.exceptionThrown":
                details = message["params"]["exceptionDetails"]
                self.errors.append(details.get("exception", {}).get("description", str(details)))
            if message.get("id") == message_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, timeout_s: float = 30) -> float:
        """Navigate to `url` and wait until the viewer says it is ready; the page's own
        time to ready (ms since navigation start)."""
        self.send("Page.navigate", url=url)
        deadline = time.monotonic() + timeout_s
        ready = f"location.href === {json.dumps(url)} && {READY}"
        while not self.evaluate(ready):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} not ready after {timeout_s}s; errors: {self.errors}")
            time.sleep(0.02)
        return float(self.evaluate("window.LLMF.readyMs"))

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def close(self) -> None:
        try:
            self._stack.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()

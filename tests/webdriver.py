"""Headless Chromium driven through chromedriver with the W3C WebDriver protocol: JSON over
HTTP on 127.0.0.1, spoken with the standard library. The dozen commands a test needs are a
page of code, so no client library (selenium) is added to the test dependencies.

Chromium and chromedriver come from Debian's packages (scripts/setup.sh installs them); a test
that needs them and cannot find them fails, it never skips."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C key of an element reference
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1200,900"]


class WebDriverError(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def binaries() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        raise WebDriverError("headless Chromium and chromedriver are needed: run scripts/setup.sh "
                             "(it installs Debian's chromium and chromium-driver)")
    return chromium, driver


class Browser:
    def __init__(self, profile: Path) -> None:
        chromium, driver = binaries()
        self.port = _free_port()
        self.driver = subprocess.Popen([driver, f"--port={self.port}"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if self._call("GET", "/status")["ready"]:
                    break
            except (OSError, WebDriverError):
                pass
            if time.monotonic() > deadline:
                self.driver.kill()
                raise WebDriverError("chromedriver did not start")
            time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": chromium, "args": [*FLAGS, f"--user-data-dir={profile}"]}}}}
        try:
            self.session = self._call("POST", "/session", caps)["sessionId"]
        except BaseException:
            self.driver.kill()  # no session, no browser: the driver must not outlive the test
            self.driver.wait(timeout=20)
            raise

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as answer:
                return json.loads(answer.read())["value"]
        except urllib.error.HTTPError as exc:
            raise WebDriverError(f"{method} {path}: {exc.read()[:500]!r}") from exc

    def cmd(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self._call(method, f"/session/{self.session}{path}", body)

    # -- what tests use ---------------------------------------------------------------------
    def get(self, url: str) -> None:
        self.cmd("POST", "/url", {"url": url})

    @property
    def url(self) -> str:
        return str(self.cmd("GET", "/url"))

    def find(self, css: str) -> str:
        return str(self.cmd("POST", "/element", {"using": "css selector", "value": css})[ELEMENT])

    def find_all(self, css: str) -> list[str]:
        return [e[ELEMENT] for e in
                self.cmd("POST", "/elements", {"using": "css selector", "value": css})]

    def click(self, css: str) -> None:
        self.cmd("POST", f"/element/{self.find(css)}/click", {})

    def type(self, css: str, text: str, clear: bool = True) -> None:
        element = self.find(css)
        if clear:
            self.cmd("POST", f"/element/{element}/clear", {})
        self.cmd("POST", f"/element/{element}/value", {"text": text})

    def text(self, css: str = "body") -> str:
        return str(self.cmd("GET", f"/element/{self.find(css)}/text"))

    def script(self, code: str, *args: Any) -> Any:
        return self.cmd("POST", "/execute/sync", {"script": code, "args": list(args)})

    def accept_alert(self) -> str:
        text = str(self.cmd("GET", "/alert/text"))
        self.cmd("POST", "/alert/accept", {})
        return text

    def wait_for(self, check: Any, timeout: float = 30.0, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = check()
            except WebDriverError:
                found = None
            if found:
                return found
            if time.monotonic() > deadline:
                raise WebDriverError(f"timed out waiting for {what or check}")
            time.sleep(0.1)

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self.cmd("GET", "/screenshot")))
        return path

    def close(self) -> None:
        try:
            self.cmd("DELETE", "")
        except (OSError, WebDriverError):
            pass
        self.driver.terminate()
        try:
            self.driver.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.driver.kill()

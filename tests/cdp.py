"""A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe`` for browser tests.

Chromium reads commands from its fd 3 and writes replies and events to its fd 4, each message a
JSON object terminated by a NUL byte. No websocket, no extra package.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--hide-scrollbars",
    "--mute-audio",
]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageLoad:
    """What happened while a page loaded."""

    console: list[dict[str, Any]] = field(default_factory=list)  # consoleAPICalled params
    exceptions: list[dict[str, Any]] = field(default_factory=list)  # exceptionThrown params
    log: list[dict[str, Any]] = field(default_factory=list)  # Log.entryAdded entries
    requests: list[str] = field(default_factory=list)  # every URL requested
    dialogs: list[str] = field(default_factory=list)  # alert()/confirm() messages

    @property
    def errors(self) -> list[str]:
        out = [f"console.{c.get('type')}: {c.get('args')}" for c in self.console]
        out += [f"exception: {e.get('exceptionDetails')}" for e in self.exceptions]
        out += [
            f"log {e.get('level')}: {e.get('text')} ({e.get('url')})"
            for e in self.log
            if e.get("level") in ("error", "warning")
        ]
        out += [f"dialog: {d}" for d in self.dialogs]
        return out


class Browser:
    """One headless Chromium with a fresh profile, driven over the debugging pipe."""

    #: how long one answer or event may take: only against a hang (on a loaded machine a page
    #: with its libraries can take a minute to load and draw, and then the test would fail
    #: for the machine, not for the page)
    TIMEOUT_S = 300.0

    def __init__(self, executable: str, *, timeout_s: float = TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._profile = tempfile.mkdtemp(prefix="quicsm-chromium-")
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        # move the child's ends out of the way of 3 and 4 before dup2-ing them there
        hi_cmd_r, hi_res_w = _high_dup(cmd_r), _high_dup(res_w)

        def child_fds() -> None:
            os.dup2(hi_cmd_r, 3)
            os.dup2(hi_res_w, 4)

        self._proc = subprocess.Popen(
            [
                executable,
                *FLAGS,
                f"--user-data-dir={self._profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=child_fds,
        )
        for fd in (cmd_r, res_w, hi_cmd_r, hi_res_w):
            os.close(fd)
        self._out = cmd_w
        self._in = res_r
        self._buf = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []

    # -- protocol ------------------------------------------------------------------------------
    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            ready, _, _ = select.select([self._in], [], [], left)
            if ready:
                chunk = os.read(self._in, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the debugging pipe")
                self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self._events.append(reply)

    def wait_event(self, method: str, session: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        i = 0
        while True:
            while i < len(self._events):
                ev = self._events[i]
                i += 1
                if ev.get("method") == method and ev.get("sessionId") == session:
                    return ev
                if ev.get("method") == "Page.javascriptDialogOpening" and not ev.get("_handled"):
                    # a dialog blocks the page (and its load event) until dismissed
                    ev["_handled"] = True
                    self.send("Page.handleJavaScriptDialog", {"accept": True}, session=session)
            self._events.append(self._read_message(deadline))

    # -- high level ----------------------------------------------------------------------------
    def load(self, url: str, *, width: int = 1200) -> tuple[str, PageLoad]:
        """Open ``url`` in a new tab and wait for its load event; returns (session, events)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        self._events.clear()
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session)
        # let late console messages and requests arrive
        self.send("Runtime.evaluate", {"expression": "1", "awaitPromise": True}, session=session)
        events = PageLoad()
        for ev in self._events:
            if ev.get("sessionId") != session:
                continue
            method, params = ev.get("method"), ev.get("params", {})
            if method == "Runtime.consoleAPICalled":
                events.console.append(params)
            elif method == "Runtime.exceptionThrown":
                events.exceptions.append(params)
            elif method == "Log.entryAdded":
                events.log.append(params.get("entry", {}))
            elif method == "Network.requestWillBeSent":
                events.requests.append(params.get("request", {}).get("url", ""))
            elif method == "Page.javascriptDialogOpening":
                events.dialogs.append(params.get("message", ""))
        return session, events

    def evaluate(self, session: str, expression: str) -> Any:
        res = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True},
            session=session,
        )
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def screenshot(self, session: str, path: Path, *, width: int = 1200) -> Path:
        """A full-page PNG."""
        metrics = self.send("Page.getLayoutMetrics", session=session)
        height = int(metrics.get("cssContentSize", metrics.get("contentSize"))["height"])
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": max(height, 200), "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        data = self.send("Page.captureScreenshot", {"format": "png"}, session=session)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.send("Browser.close")
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._out, self._in):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _high_dup(fd: int) -> int:
    import fcntl

    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    return int(new)


def screenshot_then_settle(browser: Browser, session: str, path: Path, width: int) -> Path:
    """A full-page screenshot of a quicsm page, then the redraw it may cause waited for: the
    screenshot sets the viewport's height to the page's, and a resize redraws the page from its
    spec 200 ms later (``data-drawn`` set again when done); on a loaded machine, a zoom set
    before that redraw ends is lost with the old view."""
    browser.evaluate(
        session,
        "window.quicsmResized = false; document.body.dataset.drawn = '';"
        " window.addEventListener('resize', function () { window.quicsmResized = true; }); 1",
    )
    browser.screenshot(session, path, width=width)
    browser.evaluate(session, "new Promise(r => setTimeout(r, 400))")  # past the page's 200 ms
    if browser.evaluate(session, "window.quicsmResized ? 'yes' : ''") != "yes":
        browser.evaluate(session, "document.body.dataset.drawn = 'yes'; 1")
    give_up = time.monotonic() + 180  # against a hang only: a loaded machine draws slowly
    while time.monotonic() < give_up:
        state = browser.evaluate(session, "document.body.dataset.drawn || ''")
        if state:
            if state != "yes":
                raise AssertionError(f"the page did not redraw: {state}")
            return path
        time.sleep(0.05)
    raise AssertionError("the page never redrew after the screenshot")

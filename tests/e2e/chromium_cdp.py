"""Drive headless Chromium over its DevTools protocol (aiohttp websocket): load a page, collect console
messages and uncaught exceptions, evaluate JavaScript, take full-page screenshots. Test helper, no new
dependency; Chromium is Debian's `chromium` (installed by scripts/test)."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)
LISTENING = re.compile(r"DevTools listening on (ws://127\.0\.0\.1:(\d+)/\S+)")


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageSession:
    ws: aiohttp.ClientWebSocketResponse
    console: list[dict] = field(default_factory=list)  # {"level", "text"} from console.* and the browser log
    exceptions: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    async def call(self, method: str, **params: object) -> dict:
        msg_id = next(self._ids)
        await self.ws.send_json({"id": msg_id, "method": method, "params": params})
        while True:
            msg = json.loads((await asyncio.wait_for(self.ws.receive(), 30)).data)
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)

    async def wait_for(self, event: str) -> dict:
        while True:
            msg = json.loads((await asyncio.wait_for(self.ws.receive(), 30)).data)
            self._event(msg)
            if msg.get("method") == event:
                return msg.get("params", {})

    def _event(self, msg: dict) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.console.append({"level": params.get("type"), "text": text})
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            self.console.append({"level": entry.get("level"), "text": entry.get("text", "")})
        elif method == "Runtime.exceptionThrown":
            self.exceptions.append(json.dumps(params.get("exceptionDetails", {}))[:500])
        elif method == "Network.requestWillBeSent":
            self.requests.append(params.get("request", {}).get("url", ""))

    async def evaluate(self, expression: str) -> object:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluation failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def screenshot(self, path: Path, *, width: int = 1200, dark: bool = False) -> None:
        scheme = "dark" if dark else "light"
        await self.call(
            "Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": scheme}]
        )
        height = int(await self.evaluate("document.documentElement.scrollHeight"))
        await self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        shot = await self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))


class Chromium:
    """A headless Chromium process on a private profile; `open(url)` gives a PageSession."""

    def __init__(self, profile_dir: Path) -> None:
        binary = chromium_path()
        if binary is None:
            raise RuntimeError("chromium is not installed: run scripts/test (apt-get install chromium)")
        self.log_path = profile_dir.with_suffix(".log")
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile_dir}", "about:blank"],
            stderr=self._log,
            stdout=subprocess.DEVNULL,
        )
        self.port = self._wait_listening()

    def _wait_listening(self, timeout_s: float = 60.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            match = LISTENING.search(self.log_path.read_text(errors="replace"))
            if match:
                return int(match.group(2))
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.close()
        raise RuntimeError(
            "chromium did not start DevTools:\n" + self.log_path.read_text(errors="replace")[-2000:]
        )

    async def page_ws_url(self, session: aiohttp.ClientSession) -> str:
        async with session.get(f"http://127.0.0.1:{self.port}/json/list") as response:
            targets = await response.json()
        return next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._log.close()


async def inspect_page(
    chromium: Chromium, url: str, checks_js: str, shots: dict[str, tuple[Path, bool]]
) -> dict:
    """Load `url`, evaluate `checks_js`, take screenshots {name: (path, dark)}; return checks and console."""
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(await chromium.page_ws_url(http), max_msg_size=0) as ws,
    ):
        page = PageSession(ws)
        for domain in ("Runtime", "Log", "Page", "Network"):
            await page.call(f"{domain}.enable")
        await page.call("Page.navigate", url=url)
        await page.wait_for("Page.loadEventFired")
        checks = await page.evaluate(checks_js)
        for path, dark in shots.values():
            await page.screenshot(path, dark=dark)
        return {
            "checks": checks,
            "console": page.console,
            "exceptions": page.exceptions,
            "requests": page.requests,
        }

"""The viewer in a real headless Chromium (Debian's package, driven by playwright): approve a
paused call, watch the answer arrive live, and move the time slider."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers import response, text, tool_use, write_script
from tests.server.serving import serving

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="!!! no chromium: `make test` installs Debian's chromium (apt-get install chromium)")


def _until(predicate, timeout: float = 60):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _shot(page, tmp_path: Path, name: str) -> None:  # type: ignore[no-untyped-def]
    page.screenshot(path=str(tmp_path / name), full_page=True)
    keep = os.environ.get("CHRONICLE_SCREENSHOTS_DIR")  # set to docs/img to refresh the README's pictures
    if keep:
        page.screenshot(path=str(Path(keep) / name), full_page=True)


def test_approve_in_the_browser_see_the_answer_arrive_and_travel_back_in_time(db_url, workspace, tmp_path):
    playwright_api = pytest.importorskip("playwright.sync_api")
    script = write_script(tmp_path / "s.json", [
        [response(text("I will write the file."), tool_use("tu_b", "bash", command="echo approved > out.txt")),
         response(text("Done: out.txt says approved."))],
        [response(text("Second turn answer."))],
    ])
    with serving(db_url, workspace) as base, playwright_api.sync_playwright() as pw:
        sid = httpx.post(f"{base}/sessions", json={"prompt": "write out.txt", "provider": f"scripted:{script}"}).json()["session_id"]
        _until(lambda: any(e["event"] == "ApprovalRequested" for e in httpx.get(f"{base}/sessions/{sid}/log").json()))

        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto(f"{base}/ui/sessions/{sid}")
        expect = playwright_api.expect
        expect(page.locator("#approvals")).to_contain_text("echo approved > out.txt")
        _shot(page, tmp_path, "viewer-approval.png")

        page.locator("#approvals button[data-action=approve]").click()
        expect(page.locator("#action-result")).to_contain_text("approved")
        expect(page.locator("#conversation")).to_contain_text("Done: out.txt says approved.", timeout=60_000)
        assert (workspace / "out.txt").read_text().strip() == "approved"

        httpx.post(f"{base}/sessions/{sid}/inputs", json={"prompt": "and now?"})
        _until(lambda: httpx.get(f"{base}/sessions").json()[0]["turns"] == 2
               and httpx.get(f"{base}/sessions").json()[0]["status"] == "idle")
        page.goto(f"{base}/ui/sessions/{sid}")
        expect(page.locator("#conversation")).to_contain_text("Second turn answer.")
        page.locator("#turn-slider").fill("1")
        page.wait_for_url("**?at=1")
        expect(page.locator("#conversation")).not_to_contain_text("Second turn answer.")
        expect(page.locator("#conversation")).to_contain_text("Done: out.txt says approved.")
        _shot(page, tmp_path, "viewer-time-travel.png")
        browser.close()
    assert (tmp_path / "viewer-approval.png").stat().st_size > 10_000

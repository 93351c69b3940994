"""A real browser (Debian's headless Chromium through chromedriver) opens the viewer, browses
the tree, searches, edits, forgets and undoes; each change is then checked through the MCP
tools, called by a real stdio MCP client, the way Claude Code sees memory. Screenshots of every
page are kept in the test's temporary folder."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from lore_plugin.embedding.embedder import assemble_from_packages
from lore_plugin.recall.memory import Memory
from tests.conftest import MODEL_CACHE
from tests.recall.test_memory import tree
from tests.server.test_server import running
from tests.web.test_viewer import start_viewer
from tests.webdriver import Browser

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture()
def anyio_backend() -> str:
    return "asyncio"


def shot(browser: Browser, folder: Path, name: str) -> None:
    path = browser.screenshot(folder / f"{name}.png")
    assert path.stat().st_size > 5_000  # a rendered page, not a blank image


async def test_a_browser_browses_searches_edits_forgets_and_undoes_and_mcp_sees_it(
        tmp_path, embedder):
    home, db = tmp_path / "home", tmp_path / "home" / "memory.db"
    memory = Memory(db, embedder, project=str(tmp_path))
    ids = tree(memory)
    memory.close()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    proc, url = start_viewer(home, db)
    browser = Browser(tmp_path / "chromium-profile")
    model_dir = assemble_from_packages(MODEL_CACHE / "all-MiniLM-L6-v2")
    assert model_dir is not None
    try:
        # The token in the URL becomes a cookie the page's script cannot read.
        browser.get(url)
        assert "token=" not in browser.url and browser.url.endswith("/")
        assert browser.script("return document.cookie") == ""
        assert "Billing database" in browser.text("#tree")
        shot(browser, shots, "1-topics")

        # Opening a topic fetches its children.
        assert "PostgreSQL for invoices" not in browser.text("#tree")
        browser.click(f'details[data-src="/children?id={ids["db"]}"] > summary')
        browser.wait_for(lambda: "PostgreSQL for invoices" in browser.text("#tree"),
                         what="the topic's children")
        shot(browser, shots, "2-topic-opened")

        # Search from the header, then open the best match.
        browser.type("header input[name=q]", "which database holds invoices")
        browser.click("header button")
        browser.wait_for(lambda: "/search" in browser.url, what="the search page")
        results = browser.text("#results")
        assert results.startswith("PostgreSQL for invoices") and "match" in results
        shot(browser, shots, "3-search")
        browser.click("#results .result a")
        browser.wait_for(lambda: f"/fragment/{ids['pg']}" in browser.url, what="the fragment")
        assert "logical replication" in browser.text("#content")
        shot(browser, shots, "4-fragment")

        # Edit it through the form.
        browser.type("#edit input[name=summary]", "PostgreSQL 17 for invoices")
        browser.type("#edit textarea[name=content]",
                     "Invoices live in PostgreSQL 17 since the spring upgrade.")
        browser.click("#edit button")
        browser.wait_for(lambda: "Saved" in browser.text("#flash"), what="the saved notice")
        assert "spring upgrade" in browser.text("#content")
        shot(browser, shots, "5-edited")

        async with running(db, tmp_path, model_dir) as lore:
            text, data = await lore.ok("query_memory", topic="PostgreSQL 17 spring upgrade",
                                       depth=1)
            assert ids["pg"].startswith(data["fragments"][0]["id"])
            assert "spring upgrade" in text

        # Forget a fact: the page asks first, and the fact is gone for the MCP tools too.
        browser.get(url.split("?")[0] + f"fragment/{ids['css']}")
        shot(browser, shots, "6-fact")
        forget = [b for b in browser.find_all("form[data-confirm] button")
                  if "children move up" in browser.cmd("GET", f"/element/{b}/text")]
        browser.cmd("POST", f"/element/{forget[0]}/click", {})
        assert "cannot be undone" in browser.accept_alert()
        browser.wait_for(lambda: "Forgot 1 fragment" in browser.text("#flash"),
                         what="the forget notice")
        shot(browser, shots, "7-forgotten")

        async with running(db, tmp_path, model_dir) as lore:
            missing = await lore.error("traverse_memory", fragment_id=ids["css"],
                                       direction="children")
            assert "no fragment" in missing
            _, data = await lore.ok("query_memory", topic="Tailwind CSS-in-JS styling", depth=2)
            assert not any(ids["css"].startswith(r["id"]) for r in data["fragments"])

        # The activity page undoes the edit and says the forgetting cannot be undone.
        browser.get(url.split("?")[0] + "activity")
        journal = browser.text("#journal")
        assert "forgetting erases the text for good" in journal
        shot(browser, shots, "8-activity")
        browser.click("#journal form button")  # the newest undoable entry: the edit
        browser.wait_for(lambda: "undid: edited" in browser.text("#flash"), what="the undo")
        shot(browser, shots, "9-undone")

        async with running(db, tmp_path, model_dir) as lore:
            text, data = await lore.ok("traverse_memory", fragment_id=ids["db"],
                                       direction="children")
            assert "PostgreSQL for invoices" in text and "PostgreSQL 17" not in text
    finally:
        browser.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert len(list(shots.glob("*.png"))) == 9

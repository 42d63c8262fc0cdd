"""The dashboard in a real browser: headless Chromium (Debian's chromium and chromedriver,
driven by Selenium) against a live name server and broker. It creates a topic, sends a
message, finds the topic in the list and the message by key, and resends a dead letter,
taking a screenshot of each page; RMQ_DASHBOARD_SCREENSHOTS=dir also copies them there
(docs/img holds the ones the docs show)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from rmq.client import ConsumeFromWhere, ConsumeStatus, Message, MessageExt, MQAdmin, Producer, PushConsumer
from rmq.client.admin import TopicConfig

from .conftest import Stack, wait_for

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1280,900")  # fmt: skip
FAST = {"poll_name_server_interval": 1.0, "rebalance_interval": 1.0}

pytestmark = pytest.mark.slow


@pytest.fixture
def browser(tmp_path: Path) -> Any:
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: scripts/bootstrap.sh installs chromium and chromium-driver")
        pytest.skip("no Chromium here (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()


async def test_operator_flow_in_chromium(stack: Stack, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    shots = tmp_path / "screenshots"
    shots.mkdir()

    async def act(fn: Callable[[], Any]) -> Any:
        return await trio.to_thread.run_sync(fn)

    async def visit(path: str) -> None:
        await act(lambda: browser.get(stack.url + path))

    async def text_of(css: str) -> str:
        return str(await act(lambda: browser.find_element(By.CSS_SELECTOR, css).text))

    async def fill(css: str, value: str) -> None:
        def do() -> None:
            field = browser.find_element(By.CSS_SELECTOR, css)
            field.clear()
            field.send_keys(value)

        await act(do)

    async def click(css: str) -> None:
        """Click and wait for the next page (each click here submits a form or follows a link)."""
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.support.ui import WebDriverWait

        def do() -> None:
            page = browser.find_element(By.TAG_NAME, "html")
            browser.find_element(By.CSS_SELECTOR, css).click()

            def left(_: Any) -> bool:
                # Chromium reports a node of the page being replaced either as stale or as
                # "does not belong to the document": both mean the next page is loading
                try:
                    page.is_enabled()
                except WebDriverException:
                    return True
                return False

            WebDriverWait(browser, 20).until(left)

        await act(do)

    async def shot(name: str) -> None:
        await act(lambda: browser.save_screenshot(str(shots / f"dashboard-{name}.png")))

    # a dead letter to resend later: a consumer that refuses it, with no retries
    async with Producer("pg_web", stack.ns) as producer:
        await producer.send(Message("WebDlq", b"refused once", keys="dead-1"))
    refused: list[MessageExt] = []

    async def refuse(msg: MessageExt) -> ConsumeStatus:
        refused.append(msg)
        return ConsumeStatus.RECONSUME_LATER

    first = ConsumeFromWhere.FIRST_OFFSET
    consumer = PushConsumer("cg_web", stack.ns, handler=refuse, consume_from_where=first, max_reconsume_times=0, **FAST)
    consumer.subscribe("WebDlq", "*")
    async with consumer:
        # create a topic from the topics page
        await visit("/topics")
        await fill("#new-topic", "WebOrders")
        await click("#create-topic-button")
        assert "topic WebOrders saved" in await text_of("#flash")
        # send a message from the topic's page
        await fill("#send-keys", "web-1")
        await fill("#send-body", "sent from the browser")
        await click("#send-button")
        assert (await text_of("#flash")).startswith("SEND_OK")
        await shot("topic")
        # the topic is in the list
        await visit("/topics?q=web")
        assert "WebOrders" in await text_of("#topics")
        await shot("topics")
        # the message by key, then its page
        await visit("/messages")
        await fill("#key-topic", "WebOrders")
        await fill("#key", "web-1")
        await click("#key-button")
        assert "sent from the browser" in await text_of("#messages")
        await shot("messages")
        await click("#messages a")
        assert "sent from the browser" in await text_of("#body")
        await shot("message")

        # resend the dead letter
        async def dead() -> bool:
            await visit("/dlq?group=cg_web")
            return "1 dead letter(s)" in str(await act(lambda: browser.page_source))

        await wait_for(dead)
        await shot("dlq")
        before = len(refused)
        await click("#dlq button.resend")
        assert "resent 1 of 1" in await text_of("#flash")

        async def redelivered() -> bool:
            return len(refused) > before

        await wait_for(redelivered)
        assert refused[-1].body == b"refused once"

        # the overview pages, for the record
        for path, name in (("/consumer/cg_web", "consumer"), ("/cluster", "cluster")):
            await visit(path)
            await shot(name)

        async def charted() -> bool:
            await visit("/")
            return "WebOrders" in str(await act(lambda: browser.page_source))

        await wait_for(charted)
        await shot("home")

    taken = sorted(p.name for p in shots.iterdir())
    assert len(taken) == 8 and all((shots / n).stat().st_size > 5000 for n in taken)
    target = os.environ.get("RMQ_DASHBOARD_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for name in taken:
            shutil.copy(shots / name, Path(target) / name)


async def test_cross_site_form_is_refused_in_chromium(stack: Stack, browser: Any, tmp_path: Path) -> None:
    """A page on another origin posts a form that would delete a topic; the browser shows
    the dashboard's refusal and the topic is still there."""
    import functools
    import http.server
    import threading

    from selenium.webdriver.common.by import By

    async with MQAdmin(stack.ns) as admin:
        await admin.create_topic(stack.broker.address, TopicConfig("WebGuarded", 2, 2))
    site = tmp_path / "evil"
    site.mkdir()
    (site / "index.html").write_text(
        f'<form id="f" method="post" action="{stack.url}/topic/WebGuarded/delete"><input name="csrf" value="x">'
        "</form><script>document.getElementById('f').submit()</script>"
    )
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        await trio.to_thread.run_sync(lambda: browser.get(stack.url + "/topics"))  # a session, as a victim has
        await trio.to_thread.run_sync(lambda: browser.get(f"http://127.0.0.1:{evil.server_address[1]}/"))

        async def refused() -> bool:
            return "came from another site" in str(await trio.to_thread.run_sync(lambda: browser.page_source))

        await wait_for(refused)
        shot = tmp_path / "csrf.png"
        await trio.to_thread.run_sync(lambda: browser.save_screenshot(str(shot)))
        assert browser.find_element(By.ID, "error").text.startswith("refused")
    finally:
        evil.shutdown()
        evil.server_close()
    async with MQAdmin(stack.ns) as admin:
        assert "WebGuarded" in await admin.topic_list()


async def test_operator_pages_in_chromium(stack: Stack, browser: Any, tmp_path: Path) -> None:
    """The pages added after the first round: topic config editing, group create/edit with
    sorting and auto-refresh, skip accumulated, a message's consumer groups and consuming it
    again, running info as tables, dead-letter listing, OPS, and the home page's charts."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    shots = tmp_path / "screenshots"
    shots.mkdir()

    async def act(fn: Callable[[], Any]) -> Any:
        return await trio.to_thread.run_sync(fn)

    async def visit(path: str) -> None:
        await act(lambda: browser.get(stack.url + path))

    async def text_of(css: str) -> str:
        return str(await act(lambda: browser.find_element(By.CSS_SELECTOR, css).text))

    async def fill(css: str, value: str) -> None:
        def do() -> None:
            field = browser.find_element(By.CSS_SELECTOR, css)
            field.clear()
            field.send_keys(value)

        await act(do)

    async def click(css: str) -> None:
        def do() -> None:
            page = browser.find_element(By.TAG_NAME, "html")
            browser.find_element(By.CSS_SELECTOR, css).click()

            def left(_: Any) -> bool:
                try:
                    page.is_enabled()
                except WebDriverException:
                    return True
                return False

            WebDriverWait(browser, 20).until(left)

        await act(do)

    async def shot(name: str) -> None:
        await act(lambda: browser.save_screenshot(str(shots / f"dashboard-{name}.png")))

    got: list[MessageExt] = []

    async def handler(msg: MessageExt) -> None:
        got.append(msg)

    async with Producer("pg_pages", stack.ns) as producer:
        sent = await producer.send(Message("WebPages", b"for the pages", keys="page-1"))
    consumer = PushConsumer(
        "cg_pages", stack.ns, handler=handler, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST
    )
    consumer.subscribe("WebPages", "*")
    async with consumer:
        # topic config and permission
        await visit("/topic/WebPages")
        await fill("#config-read", "4")
        await act(lambda: Select(browser.find_element(By.ID, "config-perm")).select_by_value("4"))
        await click("#topic-config-button")
        assert "topic WebPages updated" in await text_of("#flash")
        assert "R (4)" in await text_of("#route")
        await shot("topic-config")

        # a group made from the consumers page, then the list sorted and refreshing
        await visit("/consumers")
        await fill("#new-group", "cg_web_made")
        await click("#create-group-button")
        assert "group cg_web_made saved" in await text_of("#flash")
        await shot("group-edit")
        await visit("/consumers?sort=group&desc=1&refresh=30")
        assert "cg_web_made" in await text_of("#consumers")
        assert await act(lambda: browser.find_element(By.ID, "refresh").get_attribute("value")) == "30"
        await shot("consumers")

        # the message's consumer groups, once cg_pages has consumed it; consume it again
        async def consumed() -> bool:
            await visit(f"/message/{sent.offset_msg_id}")
            return "CONSUMED" in str(await act(lambda: browser.page_source))

        await wait_for(consumed)
        before = len(got)
        await click("#tracks button.resend-group")
        assert "CR_SUCCESS" in await text_of("#flash")
        assert len(got) == before + 1
        await shot("message-tracks")

        # running info as tables, and the skip form on the group's page
        await visit("/consumer/cg_pages")
        await shot("consumer-group")
        await click("#clients a")
        assert "WebPages broker-a" in await text_of("main")
        assert await act(lambda: len(browser.find_elements(By.CSS_SELECTOR, "table.running"))) >= 3
        await shot("running-info")
    await visit("/consumer/cg_pages")
    await act(lambda: browser.execute_script("window.confirm = () => true"))
    await click("#skip-button")
    assert "cg_pages skipped to the end of WebPages" in await text_of("#flash")

    # dead-letter listing, OPS, and the home page's chart titles
    await visit("/dlq")
    assert "Groups with dead letters" in str(await act(lambda: browser.page_source))
    await shot("dlq-groups")
    await visit("/ops")
    assert "asked first" in await text_of("#namesrvs")
    await shot("ops")

    async def charted() -> bool:
        await visit("/")
        return "<polyline" in str(await act(lambda: browser.page_source))

    await wait_for(charted)
    assert "Messages per second put into and pulled from all masters" in str(await act(lambda: browser.page_source))
    await shot("home-charts")

    taken = sorted(p.name for p in shots.iterdir())
    assert len(taken) == 9 and all((shots / n).stat().st_size > 5000 for n in taken)
    target = os.environ.get("RMQ_DASHBOARD_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for name in taken:
            shutil.copy(shots / name, Path(target) / name)

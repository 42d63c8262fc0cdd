"""The dashboard in a real browser: headless Chromium (Debian's chromium and chromedriver,
driven by Selenium) against a live name server and broker. It creates a topic, sends a
message, finds the topic in the list and the message by key, and resends a dead letter,
taking a screenshot of each page; RMQ_DASHBOARD_SCREENSHOTS=dir also copies them there
(docs/img holds the ones the docs show)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
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


@dataclass
class Tab:
    """The browser on the dashboard at `url`: each step runs in a thread (Selenium blocks)."""

    driver: Any
    url: str
    shots: Path

    async def act(self, fn: Callable[[], Any]) -> Any:
        return await trio.to_thread.run_sync(fn)

    async def visit(self, path: str) -> None:
        await self.act(lambda: self.driver.get(self.url + path))

    async def source(self) -> str:
        return str(await self.act(lambda: self.driver.page_source))

    async def text_of(self, css: str) -> str:
        from selenium.webdriver.common.by import By

        return str(await self.act(lambda: self.driver.find_element(By.CSS_SELECTOR, css).text))

    async def fill(self, css: str, value: str) -> None:
        from selenium.webdriver.common.by import By

        def do() -> None:
            field = self.driver.find_element(By.CSS_SELECTOR, css)
            field.clear()
            field.send_keys(value)

        await self.act(do)

    async def click(self, css: str) -> None:
        """Click and wait for the next page (each click here submits a form or follows a link)."""
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        def do() -> None:
            page = self.driver.find_element(By.TAG_NAME, "html")
            self.driver.find_element(By.CSS_SELECTOR, css).click()

            def left(_: Any) -> bool:
                # Chromium reports a node of the page being replaced either as stale or as
                # "does not belong to the document": both mean the next page is loading
                try:
                    page.is_enabled()
                except WebDriverException:
                    return True
                return False

            WebDriverWait(self.driver, 20).until(left)

        await self.act(do)

    async def shot(self, name: str) -> None:
        await self.act(lambda: self.driver.save_screenshot(str(self.shots / f"dashboard-{name}.png")))

    def keep(self, count: int) -> None:
        """Check the screenshots were taken; RMQ_DASHBOARD_SCREENSHOTS=dir copies them there."""
        taken = sorted(p.name for p in self.shots.iterdir())
        assert len(taken) == count and all((self.shots / n).stat().st_size > 5000 for n in taken), taken
        target = os.environ.get("RMQ_DASHBOARD_SCREENSHOTS")
        if target:
            Path(target).mkdir(parents=True, exist_ok=True)
            for name in taken:
                shutil.copy(self.shots / name, Path(target) / name)


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

    shots = tmp_path / "screenshots"
    shots.mkdir()

    tab = Tab(browser, stack.url, shots)

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
        await tab.visit("/topics")
        await tab.fill("#new-topic", "WebOrders")
        await tab.click("#create-topic-button")
        assert "topic WebOrders saved" in await tab.text_of("#flash")
        # send a message from the topic's page
        await tab.fill("#send-keys", "web-1")
        await tab.fill("#send-body", "sent from the browser")
        await tab.click("#send-button")
        assert (await tab.text_of("#flash")).startswith("SEND_OK")
        await tab.shot("topic")
        # the topic is in the list
        await tab.visit("/topics?q=web")
        assert "WebOrders" in await tab.text_of("#topics")
        await tab.shot("topics")
        # the message by key, then its page
        await tab.visit("/messages")
        await tab.fill("#key-topic", "WebOrders")
        await tab.fill("#key", "web-1")
        await tab.click("#key-button")
        assert "sent from the browser" in await tab.text_of("#messages")
        await tab.shot("messages")
        await tab.click("#messages a")
        assert "sent from the browser" in await tab.text_of("#body")
        await tab.shot("message")

        # resend the dead letter
        async def dead() -> bool:
            await tab.visit("/dlq?group=cg_web")
            return "1 dead letter(s)" in await tab.source()

        await wait_for(dead)
        await tab.shot("dlq")
        before = len(refused)
        await tab.click("#dlq button.resend")
        assert "resent 1 of 1" in await tab.text_of("#flash")

        async def redelivered() -> bool:
            return len(refused) > before

        await wait_for(redelivered)
        assert refused[-1].body == b"refused once"

        # the overview pages, for the record
        for path, name in (("/consumer/cg_web", "consumer"), ("/cluster", "cluster")):
            await tab.visit(path)
            await tab.shot(name)

        async def charted() -> bool:
            await tab.visit("/")
            return "WebOrders" in await tab.source()

        await wait_for(charted)
        await tab.shot("home")

    tab.keep(8)


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
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    shots = tmp_path / "screenshots"
    shots.mkdir()

    tab = Tab(browser, stack.url, shots)

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
        await tab.visit("/topic/WebPages")
        await tab.fill("#config-read", "4")
        await tab.act(lambda: Select(browser.find_element(By.ID, "config-perm")).select_by_value("4"))
        await tab.click("#topic-config-button")
        assert "topic WebPages updated" in await tab.text_of("#flash")
        assert "R (4)" in await tab.text_of("#route")
        await tab.shot("topic-config")

        # a group made from the consumers page, then the list sorted and refreshing
        await tab.visit("/consumers")
        await tab.fill("#new-group", "cg_web_made")
        await tab.click("#create-group-button")
        assert "group cg_web_made saved" in await tab.text_of("#flash")
        await tab.shot("group-edit")
        await tab.visit("/consumers?sort=group&desc=1&refresh=30")
        assert "cg_web_made" in await tab.text_of("#consumers")
        assert await tab.act(lambda: browser.find_element(By.ID, "refresh").get_attribute("value")) == "30"
        await tab.shot("consumers")

        # the message's consumer groups, once cg_pages has consumed it; consume it again
        async def consumed() -> bool:
            await tab.visit(f"/message/{sent.offset_msg_id}")
            return "CONSUMED" in await tab.source()

        await wait_for(consumed)
        before = len(got)
        await tab.click("#tracks button.resend-group")
        assert "CR_SUCCESS" in await tab.text_of("#flash")
        assert len(got) == before + 1
        await tab.shot("message-tracks")

        # running info as tables, and the skip form on the group's page
        await tab.visit("/consumer/cg_pages")
        await tab.shot("consumer-group")
        await tab.click("#clients a")
        assert "WebPages broker-a" in await tab.text_of("main")
        assert await tab.act(lambda: len(browser.find_elements(By.CSS_SELECTOR, "table.running"))) >= 3
        await tab.shot("running-info")
    await tab.visit("/consumer/cg_pages")
    await tab.act(lambda: browser.execute_script("window.confirm = () => true"))
    await tab.click("#skip-button")
    assert "cg_pages skipped to the end of WebPages" in await tab.text_of("#flash")

    # dead-letter listing, OPS, and the home page's chart titles
    await tab.visit("/dlq")
    assert "Groups with dead letters" in await tab.source()
    await tab.shot("dlq-groups")
    await tab.visit("/ops")
    assert "asked first" in await tab.text_of("#namesrvs")
    await tab.shot("ops")

    async def charted() -> bool:
        await tab.visit("/")
        return "<polyline" in await tab.source()

    await wait_for(charted)
    assert "Messages per second put into and pulled from all masters" in await tab.source()
    await tab.shot("home-charts")

    tab.keep(9)


async def test_acl_page_in_chromium(acl_stack: Stack, browser: Any, tmp_path: Path) -> None:
    """plain_acl.yml's accounts and white list on a broker with ACL on: add an account."""
    shots = tmp_path / "screenshots"
    shots.mkdir()
    tab = Tab(browser, acl_stack.url, shots)
    await tab.visit("/acl")
    assert "RocketMQUser" in await tab.text_of("#accounts")
    await tab.fill("#acl-key", "WebAccount")
    await tab.fill("#acl-secret", "web-secret")
    await tab.fill("#acl-topic-perms", "Orders=PUB|SUB")
    await tab.click("#acl-account-button")
    assert "account WebAccount saved on 1 broker(s)" in await tab.text_of("#flash")
    assert "Orders=PUB|SUB" in await tab.text_of("#accounts")
    await tab.shot("acl")
    tab.keep(1)

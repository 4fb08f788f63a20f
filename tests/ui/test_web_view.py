"""The web view of `nokv serve` (`/ui/`) driven by a real headless Chromium (selenium).

A store is filled by `nokv demo` (the penguins input, three runs committed on it, a named
snapshot) plus a workbench of hostile content; a real `nokv serve` with a token serves it. The
browser is Debian's `chromium` with its `chromedriver` (never a downloaded one): paths from
$NOKV_CHROMIUM / $NOKV_CHROMEDRIVER, else /usr/bin/chromium and /usr/bin/chromedriver.
The binary under test is $NOKV_BIN, else target/debug/nokv of this checkout. Anything missing
fails the tests; nothing is skipped.

With $NOKV_UI_SCREENSHOTS set to a directory, every page visited is saved there as PNG (the
pictures in docs/ui.md are made so).
"""

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

REPO = Path(__file__).resolve().parents[2]
NOKV = os.environ.get("NOKV_BIN") or str(REPO / "target" / "debug" / "nokv")
CHROMIUM = os.environ.get("NOKV_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("NOKV_CHROMEDRIVER", "/usr/bin/chromedriver")
SHOTS = os.environ.get("NOKV_UI_SCREENSHOTS")
TOKEN = "web-view-test-token"

HOSTILE_NAME = "<script>alert(1)</script>.md"
HOSTILE_MD = (
    "# Notes\n\n<script>window.__nokv_pwned = 'markdown script';</script>\n\n"
    "<img src=x onerror=\"window.__nokv_pwned = 'markdown img'\">\n\n"
    "[click](javascript:window.__nokv_pwned='link')\n"
)
HOSTILE_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40" '
    "onload=\"window.__nokv_pwned = 'svg onload'\">"
    "<script>window.__nokv_pwned = 'svg script';</script>"
    '<rect width="40" height="40" fill="red"/></svg>'
)
HOSTILE_HTML = "<img src=x onerror=\"window.__nokv_pwned = 'json value'\"><b>bold?</b>"


def nokv(store, *args, check=True):
    return subprocess.run(
        [NOKV, "--store", str(store), *args], check=check, capture_output=True, text=True
    )


def tool(store, name, payload):
    out = nokv(store, "workbench", name, json.dumps(payload))
    env = json.loads(out.stdout)
    assert env["status"] == "success", env
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    assert Path(NOKV).is_file(), f"nokv binary not found at {NOKV}"
    store = tmp_path_factory.mktemp("ui") / "store"
    nokv(store, "demo")
    tool(store, "workbench_create", {"id": "hostile"})
    for path, text, ctype in [
        (HOSTILE_NAME, HOSTILE_MD, "text/markdown"),
        ("evil.svg", HOSTILE_SVG, "image/svg+xml"),
        ("evil.json", json.dumps({"title": HOSTILE_HTML, "list": [HOSTILE_HTML]}), "application/json"),
        ("evil.html", "<script>window.__nokv_pwned = 'html'</script>", "text/html"),
    ]:
        tool(store, "workbench_put_file", {
            "id": "hostile", "section": "outputs", "path": path, "text": text, "content_type": ctype,
        })
    port = free_port()
    env = dict(os.environ, NOKV_TOKEN=TOKEN)
    proc = subprocess.Popen(
        [NOKV, "--store", str(store), "serve", "--listen", f"127.0.0.1:{port}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            req = urllib.request.Request(url + "/healthz", headers={"Authorization": f"Bearer {TOKEN}"})
            urllib.request.urlopen(req, timeout=1).read()
            break
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.time() < deadline, "nokv serve did not come up"
            time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser():
    for f in (CHROMIUM, CHROMEDRIVER):
        assert Path(f).is_file(), f"{f} is missing (apt-get install chromium chromium-driver)"
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1200,900", "--hide-scrollbars"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def shot(driver, name):
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / f"{name}.png"))


def follow(driver, element):
    """Clicks `element` and waits until the page it leads to has replaced this one: a click does
    not wait for the navigation it starts, so the next lookup could read the old page, or the
    next `get` cancel a form's POST."""
    page = driver.find_element(By.TAG_NAME, "html")
    element.click()

    def replaced(_):
        try:
            page.is_enabled()
            return False
        except WebDriverException:
            # Stale, or chromedriver's "node does not belong to the document": gone either way.
            return True

    WebDriverWait(driver, 10).until(replaced)
    WebDriverWait(driver, 10).until(
        lambda d: d.execute_script("return document.readyState") == "complete")


def login(driver, url, token):
    driver.get(url + "/ui/login")
    driver.find_element(By.ID, "token").send_keys(token)
    follow(driver, driver.find_element(By.CSS_SELECTOR, "button[type=submit]"))


def not_pwned(driver):
    assert driver.execute_script("return window.__nokv_pwned === undefined"), \
        driver.execute_script("return String(window.__nokv_pwned)")


def test_wrong_token_gets_the_login_page_and_no_data(served, browser):
    browser.delete_all_cookies()
    browser.get(served + "/ui/")
    assert browser.find_element(By.ID, "token")
    assert "penguins" not in browser.page_source
    login(browser, served, "not-the-token")
    assert browser.find_element(By.ID, "login-error").text == "Wrong token."
    shot(browser, "login")
    for page in ("/ui/", "/ui/wb/penguins", "/ui/file/penguins?path=input/penguins.csv",
                 "/ui/lineage", "/ui/assets/app.js", "/ui/feed/events"):
        browser.get(served + page)
        assert browser.find_elements(By.ID, "token"), page
        assert "penguins" not in browser.page_source and "Adelie" not in browser.page_source, page
    # The API refuses a browser without a session too.
    browser.get(served + "/v1/workbenches/penguins/files/input/penguins.csv")
    assert "Adelie" not in browser.page_source


def test_pages_of_the_demo_store(served, browser):
    browser.delete_all_cookies()
    login(browser, served, TOKEN)
    # The workbench list.
    names = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#workbenches a.wb")]
    for wb in ("penguins", "run-adelie", "run-chinstrap", "run-gentoo", "hostile"):
        assert wb in names
    shot(browser, "workbenches")
    browser.find_element(By.NAME, "q").send_keys("run-")
    follow(browser, browser.find_element(By.CSS_SELECTOR, "form[role=search] button"))
    names = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#workbenches a.wb")]
    assert "run-adelie" in names and "penguins" not in names

    # A workbench's tree: the five sections, then a directory.
    browser.get(served + "/ui/wb/penguins")
    sections = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#tree a.dir")]
    assert sections == ["input/", "logs/", "metadata/", "outputs/", "scripts/"]
    shot(browser, "tree")
    follow(browser, browser.find_element(By.LINK_TEXT, "input/"))
    follow(browser, browser.find_element(By.LINK_TEXT, "penguins.csv"))

    # The CSV preview: header and cells of the first rows.
    assert "penguins.csv" in browser.title
    heads = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#table-preview thead th")]
    assert heads[:3] == ["species", "island", "bill_length_mm"]
    first = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#table-preview tbody tr:first-child td")]
    assert first[:3] == ["Adelie", "Torgersen", "39.1"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#table-preview tbody tr")) == 100
    assert browser.find_element(By.ID, "generation").text.isdigit()
    href = browser.find_element(By.ID, "download").get_attribute("href")
    assert "/v1/workbenches/penguins/files/input/penguins.csv?version=" in href
    shot(browser, "file-csv")

    # The download link answers Range requests with the session cookie.
    cookie = browser.get_cookie("nokv_session")["value"]
    req = urllib.request.Request(href, headers={"Cookie": f"nokv_session={cookie}", "Range": "bytes=0-6"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 206 and r.read() == b"species"

    # The JSON tree of a run's summary.
    browser.get(served + "/ui/file/run-gentoo?path=outputs/summary.json")
    tree = browser.find_element(By.ID, "json-tree")
    assert "species" in tree.text and '"Gentoo"' in tree.text
    assert tree.find_elements(By.CSS_SELECTOR, "details[open]")
    browser.find_element(By.CSS_SELECTOR, "button[data-tree=collapse]").click()
    assert not tree.find_elements(By.CSS_SELECTOR, "details[open]")
    browser.find_element(By.CSS_SELECTOR, "button[data-tree=expand]").click()
    browser.execute_script("arguments[0].scrollIntoView()", browser.find_element(By.ID, "index-fields"))
    shot(browser, "file-json")

    # Lineage: each run's commit has the input workbench's commit as its parent.
    browser.get(served + "/ui/lineage")
    nodes = {
        g.get_attribute("data-workbench"): g.get_attribute("data-commit")
        for g in browser.find_elements(By.CSS_SELECTOR, "svg#dag g.node")
    }
    input_commit = nodes["penguins"]
    assert len(input_commit) == 64
    svg_edges = {(e.get_attribute("data-child"), e.get_attribute("data-parent"))
                 for e in browser.find_elements(By.CSS_SELECTOR, "svg#dag path.edge")}
    for run in ("run-adelie", "run-chinstrap", "run-gentoo"):
        assert (nodes[run], input_commit) in svg_edges, run
    rows = browser.find_elements(By.CSS_SELECTOR, "#edges tr.edge")
    parents = {r.find_elements(By.TAG_NAME, "td")[1].text: r.get_attribute("data-parent") for r in rows}
    for run in ("run-adelie", "run-chinstrap", "run-gentoo"):
        assert parents[run] == input_commit
    shot(browser, "lineage")
    # Click through to the input commit: the runs that used it.
    follow(browser, browser.find_element(By.CSS_SELECTOR, f"svg#dag g.node[data-commit='{input_commit}']"))
    used = {r.find_elements(By.TAG_NAME, "td")[1].text
            for r in browser.find_elements(By.CSS_SELECTOR, "#children tbody tr")}
    assert {"run-adelie", "run-chinstrap", "run-gentoo"} <= used
    assert "penguins-v1" in browser.find_element(By.ID, "commit").text
    shot(browser, "commit")

    # The demo's snapshot with its lease, and the tree frozen at it.
    browser.get(served + "/ui/snapshots/run-gentoo")
    row = [r for r in browser.find_elements(By.CSS_SELECTOR, "#snapshots tr.snapshot")
           if "gentoo-baseline" in r.text][0]
    assert row.get_attribute("data-state") == "alive"
    assert "in 6 d" in row.text or "in 7 d" in row.text
    shot(browser, "snapshots")
    follow(browser, row.find_element(By.LINK_TEXT, "tree at this snapshot"))
    assert "(snapshot" in browser.find_element(By.CSS_SELECTOR, "nav.crumbs").text
    follow(browser, browser.find_element(By.LINK_TEXT, "outputs/"))
    follow(browser, browser.find_element(By.LINK_TEXT, "summary.json"))
    assert "snapshot" in browser.find_element(By.ID, "card").text

    # GC explain of a kept file.
    browser.get(served + "/ui/gc?wb=penguins&path=input/penguins.csv")
    assert browser.find_element(By.ID, "verdict").text.startswith("kept")
    assert browser.find_elements(By.CSS_SELECTOR, "#holders li")
    shot(browser, "gc")

    # Search and aggregate over the typed index (the demo indexes each summary).
    browser.get(served + "/ui/search?run=1&fields=species,mean_body_mass_g&f=mean_body_mass_g&op=gt&v=4000")
    cells = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#results tbody td")]
    assert "Gentoo" in cells and "Adelie" not in cells
    shot(browser, "search")
    browser.get(served + "/ui/aggregate?run=1&group=species&mn=mass&mo=avg&mf=mean_body_mass_g&mn=&mo=&mf=")
    keys = [tr.find_element(By.TAG_NAME, "td").text
            for tr in browser.find_elements(By.CSS_SELECTOR, "#aggregate tbody tr")]
    assert {"Adelie", "Chinstrap", "Gentoo"} <= set(keys)
    shot(browser, "aggregate")


def test_live_feed_shows_a_new_put_within_five_seconds(served, browser):
    browser.delete_all_cookies()
    login(browser, served, TOKEN)
    browser.get(served + "/ui/feed")
    WebDriverWait(browser, 5).until(
        lambda d: d.find_element(By.ID, "feed-status").text.startswith("Live"))
    name = f"live-{time.time_ns()}.txt"
    req = urllib.request.Request(
        f"{served}/v1/workbenches/penguins/files/outputs/{name}", data=b"hello", method="PUT",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert json.loads(r.read())["status"] == "success"
    WebDriverWait(browser, 5).until(
        lambda d: f"outputs/{name}" in d.find_element(By.ID, "feed-rows").text)
    shot(browser, "feed")


def test_hostile_content_stays_inert(served, browser):
    browser.delete_all_cookies()
    login(browser, served, TOKEN)
    browser.get(served + "/ui/wb/hostile?path=outputs")
    shot(browser, "hostile-tree")
    names = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#tree a")]
    # The name's "/" makes "<script>alert(1)<" a directory holding "script>.md".
    assert "<script>alert(1)</" in names
    not_pwned(browser)
    follow(browser, browser.find_element(By.LINK_TEXT, "<script>alert(1)</"))
    follow(browser, browser.find_element(By.LINK_TEXT, "script>.md"))
    assert browser.find_element(By.CSS_SELECTOR, "#markdown-preview h1").text == "Notes"
    assert "<script>alert(1)<" in browser.find_element(By.CSS_SELECTOR, "nav.crumbs").text
    not_pwned(browser)
    shot(browser, "file-markdown")
    browser.get(served + "/ui/file/hostile?path=outputs/evil.svg")
    img = browser.find_element(By.ID, "image-preview")
    WebDriverWait(browser, 5).until(lambda d: d.execute_script("return arguments[0].complete", img))
    not_pwned(browser)
    browser.get(served + "/ui/file/hostile?path=outputs/evil.json")
    tree = browser.find_element(By.ID, "json-tree")
    assert HOSTILE_HTML in tree.text
    assert not tree.find_elements(By.TAG_NAME, "img") and not tree.find_elements(By.TAG_NAME, "b")
    not_pwned(browser)
    browser.get(served + "/ui/file/hostile?path=outputs/evil.html")
    assert "<script>" in browser.find_element(By.ID, "text-preview").text
    not_pwned(browser)
    # Opened directly, the image and the download stay inert too (sandboxing policy).
    for raw in ("/ui/raw/hostile?path=outputs/evil.svg",
                "/v1/workbenches/hostile/files/outputs/evil.svg",
                "/v1/workbenches/hostile/files/outputs/evil.html"):
        browser.get(served + raw)
        not_pwned(browser)
    browser.get(served + "/ui/feed")
    not_pwned(browser)

"""The dashboard in a real browser (headless Chromium through chromedriver),
against a running `baton dev`. Each check is what a person would do and see.

usage: dashboard_test.py DEV_JSON SCREENSHOT_DIR
"""

import json
import sys
import time
import traceback
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

DEV = json.load(open(sys.argv[1]))
SHOTS = sys.argv[2]
DASH = DEV["dashboard_url"]
LIST = DASH + "/tool-executions"
REST = DEV["rest_base"]
CREDS = DEV["credentials"]
CANARY = "canary-input-7f3a"
TERMINAL = ("completed", "failed", "cancelled")

results = []
browsers = []


# --- the REST API, to make runs -------------------------------------------------------
def api(method, path, key, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(REST + path, data=data, method=method,
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def start(tool, tool_input, user="ada@example.com"):
    body = {"gateway_id": DEV["gateway_id"], "tool_name": tool, "input": tool_input, "user_id": user}
    return api("POST", "/tool-executions", CREDS["admin_key"], body)["execution_id"]


def until(what, predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.2)


def status_of(execution_id):
    return api("GET", "/tool-executions/" + execution_id, CREDS["admin_key"])["status"]


# --- the browser ------------------------------------------------------------------------
def browser(width=1280, height=900):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                f"--window-size={width},{height}"]:
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(30)
    if width < 500:
        # Headless windows are at least 500 px wide: emulate a phone's viewport instead.
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": True})
    browsers.append(driver)
    return driver


def wait(driver, what, predicate, timeout=20):
    def settled(d):
        try:
            return predicate(d)
        except WebDriverException as e:
            # Chromedriver's own word for a stale element, when the page is
            # replaced between finding a node and reading it.
            if "does not belong to the document" in str(e):
                return False
            raise

    try:
        # A page being replaced (a navigation, a sign-out) can turn the element a
        # predicate just found stale: that is "not yet", not a failure.
        return WebDriverWait(driver, timeout, poll_frequency=0.2,
                             ignored_exceptions=(StaleElementReferenceException,)).until(settled)
    except TimeoutException:
        shot(driver, "timeout-" + what.replace(" ", "-")[:40])
        raise AssertionError("timed out waiting for " + what + " at " + driver.current_url)


def shot(driver, name):
    path = f"{SHOTS}/{name}.png"
    driver.save_screenshot(path)
    return path


def into_view(driver, element):
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)


def text(driver):
    return driver.find_element(By.TAG_NAME, "body").text


def sign_in(driver, key, url=LIST):
    driver.get(url)
    wait(driver, "the sign-in page", lambda d: "/sign-in" in d.current_url)
    field = driver.find_element(By.ID, "key")
    field.send_keys(key)
    field.send_keys(Keys.ENTER)


def signed_in(driver, key, url=LIST):
    sign_in(driver, key, url)
    wait(driver, "the list after sign-in", lambda d: "/sign-in" not in d.current_url and d.find_elements(By.ID, "list-title"))


def row_ids(driver):
    return [r.get_attribute("data-id") for r in driver.find_elements(By.CSS_SELECTOR, "table.runs tbody tr")]


def open_run(driver, execution_id, query=""):
    driver.get(f"{LIST}/{execution_id}{query}")
    wait(driver, "the details panel", lambda d: d.find_elements(By.ID, "panel"))
    return driver.find_element(By.ID, "panel")


def check(name):
    def register(f):
        results.append((name, f))
        return f
    return register


# --- the runs the checks look at ----------------------------------------------------------
echo = start("Demo.Echo", {"text": CANARY})
flaky = start("Demo.Fail", {"retryable": True, "times": 2})
broken = start("Demo.Fail", {"retryable": False, "times": 5}, user="bob@example.com")
for i in range(3):
    start("Demo.Echo", {"text": f"hello {i}"}, user="bob@example.com")
for run in (echo, flaky, broken):
    until("the setup runs to finish", lambda: status_of(run) in TERMINAL)

member = browser()
admin = browser()
state = {}


@check("baton dev's dashboard URL opens the page; a member signs in; the cookie is HttpOnly and SameSite=Strict")
def member_signs_in():
    sign_in(member, CREDS["member_key"], DASH)
    shot(member, "sign-in")
    wait(member, "the list", lambda d: d.find_elements(By.ID, "list-title"))
    assert "member key" in text(member), text(member)
    cookies = {c["name"]: c for c in member.get_cookies()}
    session = cookies["baton_dashboard"]
    assert session["httpOnly"] and session.get("sameSite") == "Strict", session
    assert member.execute_script("return document.cookie") == "", "no cookie readable by scripts"


@check("an admin signs in")
def admin_signs_in():
    signed_in(admin, CREDS["admin_key"])
    assert "admin key" in text(admin)
    assert len(row_ids(admin)) >= 6, row_ids(admin)


@check("filters go into the URL; a reload keeps them")
def filters_in_url():
    member.get(LIST)
    member.find_element(By.ID, "f-tool").send_keys("Demo.Fail")
    Select(member.find_element(By.ID, "f-outcome")).select_by_value("failure")
    member.find_element(By.CSS_SELECTOR, "form.filters button[type=submit]").click()
    wait(member, "the filtered URL", lambda d: "outcome=failure" in d.current_url)
    url = member.current_url
    assert url == LIST + "?tool_name=Demo.Fail&outcome=failure", url
    ids = row_ids(member)
    assert ids == [broken], (ids, broken)
    member.refresh()
    assert member.current_url == url
    assert row_ids(member) == ids
    assert member.find_element(By.ID, "f-tool").get_attribute("value") == "Demo.Fail"
    assert Select(member.find_element(By.ID, "f-outcome")).first_selected_option.get_attribute("value") == "failure"
    state["filtered_url"], state["filtered_ids"] = url, ids
    shot(member, "list-filtered")


@check("the pasted URL in a fresh session gives the same rows")
def pasted_url_in_fresh_session():
    fresh = browser()
    sign_in(fresh, CREDS["admin_key"], state["filtered_url"])
    wait(fresh, "the pasted view", lambda d: d.current_url == state["filtered_url"])
    assert row_ids(fresh) == state["filtered_ids"], row_ids(fresh)
    fresh.quit()
    browsers.remove(fresh)


@check("opening a Demo.Fail run shows its attempts and errors")
def fail_run_attempts():
    admin.get(LIST + "?tool_name=Demo.Fail")
    admin.find_element(By.CSS_SELECTOR, f'tr[data-id="{flaky}"] a').click()
    panel = wait(admin, "the panel", lambda d: d.find_elements(By.ID, "panel"))[0]
    assert flaky in admin.current_url and "tool_name=Demo.Fail" in admin.current_url, admin.current_url
    assert "planned failure 2 of 2" not in panel.find_element(By.CSS_SELECTOR, ".status-line").text
    attempts = panel.find_elements(By.CSS_SELECTOR, "ol.attempts li")
    assert len(attempts) == 3, [a.text for a in attempts]
    assert "Failed" in attempts[0].text and "planned failure 1 of 2" in attempts[0].text, attempts[0].text
    assert "planned failure 2 of 2" in attempts[1].text and "Succeeded" in attempts[2].text, attempts[2].text
    body = panel.text
    for fact in ("Execution ID", flaky, "Demo 1.0.0", "Immediate", "ada@example.com", "Timeline", "Created"):
        assert fact.replace("Demo 1.0.0", "Demo") in body, fact
    broken_panel = open_run(admin, broken)
    assert "planned failure 1 of 5" in broken_panel.text and "Failed" in broken_panel.text


@check("a member sees the reveal toggles disabled, with the reason")
def member_toggles_disabled():
    panel = open_run(member, flaky)
    for button in panel.find_elements(By.CSS_SELECTOR, "button.toggle"):
        assert not button.is_enabled(), button.text
    assert "takes a project admin key" in panel.find_element(By.ID, "reveal-why").text
    assert "planned failure 1 of 2" in panel.text, "attempt errors reach members"
    into_view(member, panel.find_element(By.ID, "reveal-why"))
    shot(member, "details-member")


@check("an admin reveal shows the input and the warning; URL, history and cookies hold no toggle state or key")
def admin_reveal():
    panel = open_run(admin, echo)
    url_before = admin.current_url
    history_before = admin.execute_script("return history.length")
    assert CANARY not in admin.page_source, "payloads are not in the page until revealed"
    warning = admin.find_element(By.ID, "reveal-warning")
    assert not warning.is_displayed()
    toggle = panel.find_element(By.CSS_SELECTOR, 'button.toggle[data-reveal="inputs"]')
    toggle.click()
    box = panel.find_element(By.CSS_SELECTOR, '.payload[data-part="inputs"]')
    wait(admin, "the revealed input", lambda d: CANARY in box.text)
    assert warning.is_displayed() and "Sensitive data is visible" in warning.text
    assert toggle.get_attribute("aria-pressed") == "true"
    into_view(admin, warning)
    shot(admin, "details-revealed")
    assert admin.current_url == url_before, admin.current_url
    assert admin.execute_script("return history.length") == history_before
    assert admin.execute_script("return history.state") is None
    for c in admin.get_cookies():
        for secret in (CREDS["admin_key"], CREDS["member_key"], "inputs", "reveal", "true"):
            assert secret not in c["value"] and secret not in c["name"], (c["name"], secret)
    storage = admin.execute_script("return localStorage.length + sessionStorage.length")
    assert storage == 0, storage
    for word in ("inputs", "outputs", "reveal", "show"):
        assert word not in admin.current_url.lower(), admin.current_url
    # Outputs too, as collapsible JSON; turning a toggle off removes the payload from the page.
    outputs = panel.find_element(By.CSS_SELECTOR, 'button.toggle[data-reveal="outputs"]')
    outputs.click()
    out_box = panel.find_element(By.CSS_SELECTOR, '.payload[data-part="outputs"]')
    wait(admin, "the revealed output", lambda d: "Output" in out_box.text and CANARY in out_box.text)
    assert out_box.find_elements(By.CSS_SELECTOR, ".json details > summary"), "collapsible JSON"
    toggle.click()
    outputs.click()
    wait(admin, "the payloads to go", lambda d: CANARY not in d.page_source)
    assert not warning.is_displayed()
    assert admin.current_url == url_before and admin.execute_script("return history.length") == history_before


@check("a reload hides the payload again")
def reload_hides():
    admin.refresh()
    panel = wait(admin, "the panel", lambda d: d.find_elements(By.ID, "panel"))[0]
    assert CANARY not in admin.page_source
    toggle = panel.find_element(By.CSS_SELECTOR, 'button.toggle[data-reveal="inputs"]')
    assert toggle.get_attribute("aria-pressed") == "false"
    assert not admin.find_element(By.ID, "reveal-warning").is_displayed()


@check("a running Demo.Sleep updates to completed without a reload")
def live_update():
    sleeper = start("Demo.Sleep", {"seconds": 4})
    until("the sleep to start", lambda: status_of(sleeper) == "working")
    open_run(admin, sleeper)
    admin.execute_script("window.__noReload = 1")
    row = f'tr[data-id="{sleeper}"]'
    assert admin.find_element(By.CSS_SELECTOR, row).get_attribute("data-status") in ("pending", "working")
    assert "Running" in admin.find_element(By.CSS_SELECTOR, "#panel-live .status-line").text
    shot(admin, "live-running")
    wait(admin, "the row to complete",
         lambda d: d.find_element(By.CSS_SELECTOR, row).get_attribute("data-status") == "completed", timeout=30)
    wait(admin, "the panel to complete",
         lambda d: "Completed" in d.find_element(By.CSS_SELECTOR, "#panel-live .status-line").text, timeout=30)
    assert admin.execute_script("return window.__noReload") == 1, "the page was not reloaded"


@check("operator cancel from the panel shows the outcome")
def operator_cancel():
    operator = browser()
    signed_in(operator, CREDS["operator_key"])
    long_sleep = start("Demo.Sleep", {"seconds": 300})
    until("the sleep to start", lambda: status_of(long_sleep) == "working")
    panel = open_run(operator, long_sleep)
    operator.find_element(By.CSS_SELECTOR, "details.cancel summary").click()
    operator.find_element(By.CSS_SELECTOR, "form.cancel-form button").click()
    outcome = operator.find_element(By.ID, "cancel-outcome")
    wait(operator, "the cancel outcome", lambda d: "Cancel accepted" in outcome.text)
    assert outcome.get_attribute("data-outcome") == "accepted"
    wait(operator, "the panel to show cancelled",
         lambda d: "Cancelled" in d.find_element(By.CSS_SELECTOR, "#panel-live .status-line").text, timeout=30)
    until("the run to be cancelled", lambda: status_of(long_sleep) == "cancelled")
    shot(operator, "details-cancelled")
    # A member key without the permission gets no cancel control.
    member_panel = open_run(member, start("Demo.Sleep", {"seconds": 1}))
    assert not member_panel.find_elements(By.CSS_SELECTOR, "details.cancel")
    operator.quit()
    browsers.remove(operator)


@check("read-only keys and end-user tokens are refused with a page that says why")
def refusals():
    stranger = browser()
    sign_in(stranger, CREDS["read_only_key"])
    wait(stranger, "the refusal", lambda d: "Read-only keys cannot open the dashboard" in text(d))
    shot(stranger, "refused-read-only")
    sign_in(stranger, CREDS["end_user"]["token"])
    wait(stranger, "the refusal", lambda d: "End-user tokens cannot open the dashboard" in text(d))
    sign_in(stranger, "bk_not-a-real-key")
    wait(stranger, "the refusal", lambda d: "does not recognise this key" in text(d))
    assert not [c for c in stranger.get_cookies() if c["name"] == "baton_dashboard"]
    stranger.quit()
    browsers.remove(stranger)


@check("controls are labelled and reachable with the keyboard")
def keyboard_and_labels():
    admin.get(LIST)
    unlabelled = admin.execute_script("""
        return [...document.querySelectorAll('input:not([type=hidden]), select')]
          .filter(el => !document.querySelector('label[for="' + el.id + '"]')).map(el => el.name);""")
    assert unlabelled == [], unlabelled
    body = admin.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.TAB)
    reached = False
    for _ in range(40):
        active = admin.switch_to.active_element
        if active.tag_name == "a" and "/tool-executions/te_" in (active.get_attribute("href") or ""):
            reached = True
            break
        active.send_keys(Keys.TAB)
    assert reached, "Tab reaches the first execution"
    active.send_keys(Keys.ENTER)
    wait(admin, "the panel opened from the keyboard", lambda d: d.find_elements(By.ID, "panel"))


@check("usable at a phone's width")
def phone():
    phone = browser(390, 844)
    signed_in(phone, CREDS["admin_key"])
    overflow = "return document.documentElement.scrollWidth - window.innerWidth"
    assert phone.execute_script(overflow) <= 0, "no sideways scrolling on the list"
    shot(phone, "phone-list")
    open_run(phone, flaky)
    assert phone.execute_script(overflow) <= 0, "no sideways scrolling on the details"
    panel_top = phone.find_element(By.ID, "panel").location["y"]
    list_top = phone.find_element(By.CSS_SELECTOR, "section.list").location["y"]
    assert panel_top < list_top, "the details come first on a phone"
    shot(phone, "phone-details")
    phone.quit()
    browsers.remove(phone)


@check("signing out ends the session")
def sign_out():
    member.get(LIST)
    member.find_element(By.CSS_SELECTOR, "form.sign-out button").click()
    wait(member, "the signed-out page", lambda d: "You are signed out" in text(d))
    assert not [c for c in member.get_cookies() if c["name"] == "baton_dashboard"]
    member.get(LIST)
    wait(member, "the sign-in page", lambda d: "/sign-in" in d.current_url)


@check("screenshots of the list and the details panel")
def screenshots():
    running = start("Demo.Sleep", {"seconds": 60}, user="carol@example.com")
    until("the sleep to start", lambda: status_of(running) == "working")
    admin.get(LIST)
    wait(admin, "the list", lambda d: d.find_elements(By.CSS_SELECTOR, "table.runs"))
    shot(admin, "list")
    admin.set_window_size(1280, 1250)
    open_run(admin, flaky, "?tool_name=Demo.Fail")
    shot(admin, "details")
    admin.set_window_size(1280, 900)


failed = 0
for name, f in results:
    try:
        f()
        print("ok   " + name)
    except Exception:  # noqa: BLE001 - every failure is reported, then counted
        failed += 1
        print("FAIL " + name)
        traceback.print_exc()
for b in browsers:
    b.quit()
print(f"screenshots: {SHOTS}")
print(f"{len(results) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)

"""Dashboard sign-in with a real OpenID provider (oidc-provider from npm, on
loopback), in headless Chromium, against a running `baton dev` configured with
it. People: ann (group baton-admins), bob (baton-members), eve (no grant).

usage: oidc_test.py DEV_JSON SCREENSHOT_DIR
  env: BATON_BIN, BATON_DATABASE__URL, BATON_DASHBOARD_SIGN_IN__OIDC__ISSUER_URL,
       IDP_PID (the provider running), IDP_COMMAND (starts it; `rotated` appended
       rotates its keys), IDP_LOG_DIR
"""

import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import TimeoutException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

DEV = json.load(open(sys.argv[1]))
SHOTS = sys.argv[2]
DASH = DEV["dashboard_url"]
LIST = DASH + "/tool-executions"
BASE_URL = DASH.split("/dashboard/")[0]
REST = DEV["rest_base"]
CREDS = DEV["credentials"]
PROJECT = DEV["project_id"]
DB = os.environ["BATON_DATABASE__URL"].removeprefix("sqlite://")
CANARY = "oidc-canary-41d9"
ISSUER = os.environ["BATON_DASHBOARD_SIGN_IN__OIDC__ISSUER_URL"]

results = []
browsers = []
# The provider now running: the script's (by pid), or one this test started.
provider = {"pid": int(os.environ["IDP_PID"]), "process": None}


def admin_cli(*args):
    out = subprocess.run([os.environ["BATON_BIN"], "admin", *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def api(method, path, key, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(REST + path, data=data, method=method,
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1280,900"]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(30)
    browsers.append(driver)
    return driver


def text(driver):
    return driver.find_element(By.TAG_NAME, "body").text


def shot(driver, name):
    driver.save_screenshot(f"{SHOTS}/{name}.png")


def wait(driver, what, predicate, timeout=20):
    def settled(d):
        try:
            return predicate(d)
        except WebDriverException:
            # A page being replaced (a redirect, a refresh) turns what the
            # predicate just found stale: that is "not yet", not a failure.
            return False

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.2).until(settled)
    except TimeoutException:
        shot(driver, "timeout-" + what.replace(" ", "-")[:40])
        raise AssertionError(f"timed out waiting for {what} at {driver.current_url}")


def at_provider(driver, login):
    """The provider's development login and consent pages."""
    wait(driver, "the provider's login", lambda d: d.find_elements(By.NAME, "login"))
    driver.find_element(By.NAME, "login").send_keys(login)
    driver.find_element(By.NAME, "password").send_keys("any")
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(driver, "the provider's consent", lambda d: "/interaction/" not in d.current_url
         or d.find_elements(By.CSS_SELECTOR, "input[name=prompt][value=consent]"))
    if driver.find_elements(By.CSS_SELECTOR, "input[name=prompt][value=consent]"):
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()


def sign_in(driver, login, url=LIST):
    driver.get(url)
    wait(driver, "the sign-in page", lambda d: "/sign-in" in d.current_url)
    driver.find_element(By.PARTIAL_LINK_TEXT, "organization's account").click()
    at_provider(driver, login)


def signed_in(driver, login):
    sign_in(driver, login)
    wait(driver, "the list", lambda d: d.find_elements(By.ID, "list-title"))


def callback_urls(driver):
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            url = message["params"]["request"]["url"]
            if "/dashboard/oidc/callback?" in url:
                urls.append(url)
    return urls


def audit_rows(action):
    with sqlite3.connect(DB) as db:
        return db.execute("SELECT actor_id, actor_kind, outcome FROM audit_logs WHERE action = ?", (action,)).fetchall()


def provider_answers():
    try:
        with urllib.request.urlopen(ISSUER + "/.well-known/openid-configuration", timeout=2):
            return True
    except (urllib.error.URLError, OSError):
        return False


def until(what, condition, timeout=20):
    """Polls `condition` (no browser involved) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def stop_provider():
    if provider["process"] is not None:
        provider["process"].terminate()
        provider["process"].wait(timeout=10)
    else:
        os.kill(provider["pid"], signal.SIGTERM)
    until("the provider to stop", lambda: not provider_answers())


def start_provider(*args, log="idp-rotated.log"):
    out = open(os.path.join(os.environ["IDP_LOG_DIR"], log), "w")
    provider["process"] = subprocess.Popen(shlex.split(os.environ["IDP_COMMAND"]) + list(args), stdout=out,
                                           stderr=subprocess.STDOUT)
    until("the provider to answer", provider_answers)
    return out.name


def check(name):
    def register(f):
        results.append((name, f))
        return f
    return register


admin_cli("grant-role", "--project", PROJECT, "--group", "baton-admins", "--role", "admin")
admin_cli("grant-role", "--project", PROJECT, "--group", "baton-members", "--role", "member")
run = api("POST", "/tool-executions", CREDS["admin_key"],
          {"gateway_id": DEV["gateway_id"], "tool_name": "Demo.Echo", "input": {"text": CANARY},
           "user_id": "ada@example.com"})["execution_id"]
ann, bob, eve = browser(), browser(), browser()


@check("an admin signs in with the provider, reveals a run's input, and the audit row names her")
def admin_reveals():
    sign_in(ann, "ann")
    wait(ann, "the list", lambda d: d.find_elements(By.ID, "list-title"))
    shot(ann, "signed-in-list")
    ann.get(f"{LIST}/{run}")
    panel = wait(ann, "the panel", lambda d: d.find_element(By.ID, "panel"))
    panel.find_element(By.CSS_SELECTOR, 'button.toggle[data-reveal="inputs"]').click()
    box = panel.find_element(By.CSS_SELECTOR, '.payload[data-part="inputs"]')
    wait(ann, "the revealed input", lambda d: CANARY in box.text)
    shot(ann, "admin-revealed")
    rows = audit_rows("history.reveal")
    assert ("person:ann@example.org/ann", "person", "allowed") in rows, rows
    # The dashboard's audit log shows who did it: ann, by her email.
    ann.find_element(By.CSS_SELECTOR, "nav.sections").find_element(By.LINK_TEXT, "Audit log").click()
    wait(ann, "the audit log", lambda d: d.find_elements(By.ID, "audit-title"))
    reveals = ann.find_elements(By.CSS_SELECTOR, 'tr[data-action="history.reveal"]')
    assert any("ann@example.org" in r.text and "allowed" in r.text and run in r.text for r in reveals), \
        [r.text for r in reveals]
    grants = ann.find_elements(By.CSS_SELECTOR, 'tr[data-action="role.grant"]')
    assert any("baton admin" in r.text for r in grants), [r.text for r in grants]
    shot(ann, "audit-log")


@check("a member sees the reveal disabled")
def member_reveal_disabled():
    signed_in(bob, "bob")
    bob.get(f"{LIST}/{run}")
    panel = wait(bob, "the panel", lambda d: d.find_element(By.ID, "panel"))
    toggle = panel.find_element(By.CSS_SELECTOR, 'button.toggle[data-reveal="inputs"]')
    assert not toggle.is_enabled(), "the member's reveal is disabled"
    shot(bob, "member-disabled")


@check("a member is not offered the audit log, and is refused it")
def member_audit_refused():
    bob.get(LIST)
    wait(bob, "the list", lambda d: d.find_elements(By.ID, "list-title"))
    assert not bob.find_elements(By.LINK_TEXT, "Audit log"), "no link for a member"
    bob.get(DASH + "/audit-log")
    wait(bob, "the refusal", lambda d: "The audit log is for project admins" in text(d))
    assert "ann@example.org" not in text(bob) and "history.reveal" not in text(bob)
    shot(bob, "member-audit-refused")


@check("a person without a grant is refused with a clear page")
def no_grant():
    sign_in(eve, "eve")
    wait(eve, "the refusal", lambda d: "You have no role in this project" in text(d))
    assert "baton_dashboard" not in [c["name"] for c in eve.get_cookies()]
    shot(eve, "no-grant")


@check("a person without a grant can sign in with another account (the provider asks again)")
def another_account():
    d = browser()
    sign_in(d, "eve")
    wait(d, "the refusal", lambda dr: "You have no role in this project" in text(dr))
    d.find_element(By.LINK_TEXT, "Sign in with another account").click()
    # The provider remembers eve, but is asked to authenticate again: bob signs in instead.
    at_provider(d, "bob")
    wait(d, "the list", lambda dr: dr.find_elements(By.ID, "list-title"))
    assert "Signed in with your organization's account as member" in text(d), text(d)[:300]


@check("a grant revoked mid-session takes effect on the next click")
def revoked_mid_session():
    admin_cli("grant-role", "--project", PROJECT, "--email", "ann@example.org", "--role", "member")
    ann.get(LIST)
    wait(ann, "the list", lambda d: d.find_elements(By.ID, "list-title"))
    assert admin_cli("revoke-role", "--project", PROJECT, "--group", "baton-admins")["revoked"]
    ann.get(f"{LIST}/{run}")
    panel = wait(ann, "the panel", lambda d: d.find_element(By.ID, "panel"))
    assert not panel.find_element(By.CSS_SELECTOR, 'button.toggle[data-reveal="inputs"]').is_enabled(), \
        "admin no more: only the member grant by email is left"
    assert admin_cli("revoke-role", "--project", PROJECT, "--email", "ann@example.org")["revoked"]
    ann.get(LIST)
    wait(ann, "the refusal", lambda d: "You have no role in this project" in text(d))
    shot(ann, "revoked")


@check("a tampered state is refused")
def tampered_state():
    eve.delete_all_cookies()
    eve.get(DASH + "/sign-in/oidc")
    wait(eve, "the provider's login", lambda d: d.find_elements(By.NAME, "login"))
    eve.get(BASE_URL + "/dashboard/oidc/callback?code=whatever&state=tampered")
    wait(eve, "the refusal", lambda d: "was not the one this browser started" in text(d))
    shot(eve, "tampered-state")


@check("a replayed code is refused (by the provider, with the flow's own cookie and state)")
def replayed_code():
    d = browser()
    d.get(DASH + "/sign-in/oidc")
    login_url = wait(d, "the provider's login", lambda dr: dr.find_elements(By.NAME, "login") and dr.current_url)
    d.get(DASH + "/sign-in")
    flow = [c for c in d.get_cookies() if c["name"] == "baton_dashboard_oidc"]
    assert flow, d.get_cookies()
    d.get(login_url)
    at_provider(d, "bob")
    wait(d, "the list", lambda dr: dr.find_elements(By.ID, "list-title"))
    url = callback_urls(d)[-1]
    req = urllib.request.Request(url, headers={"Cookie": f"baton_dashboard_oidc={flow[0]['value']}"})
    try:
        urllib.request.urlopen(req)
        raise AssertionError("a replayed code was accepted")
    except urllib.error.HTTPError as e:
        body = e.read().decode()
        assert e.code == 403 and "already used or has expired" in body, (e.code, body[:400])
    d.get(url)
    wait(d, "the refusal", lambda dr: "expired or began in another browser" in text(dr))


@check("an expired ID token is refused")
def expired_id_token():
    d = browser()
    sign_in(d, "dave")
    wait(d, "the refusal", lambda dr: "could not be trusted" in text(dr))
    assert "baton_dashboard" not in [c["name"] for c in d.get_cookies()]
    shot(d, "expired-id-token")


@check("sign-out ends the session, here and at the provider")
def sign_out():
    bob.get(LIST)
    bob.find_element(By.CSS_SELECTOR, "form.sign-out button").click()
    # The provider's RP-initiated logout asks, then confirms.
    wait(bob, "the provider's sign-out", lambda d: d.find_elements(By.NAME, "logout"))
    bob.find_element(By.NAME, "logout").click()
    wait(bob, "the provider's confirmation", lambda d: "Sign-out Success" in text(d))
    assert "baton_dashboard" not in [c["name"] for c in bob.get_cookies()]
    bob.get(LIST)
    wait(bob, "the sign-in page", lambda d: "/sign-in" in d.current_url)
    shot(bob, "sign-in")
    # The provider's session is over too: signing in asks for the login again.
    bob.find_element(By.PARTIAL_LINK_TEXT, "organization's account").click()
    wait(bob, "the provider's login", lambda d: d.find_elements(By.NAME, "login"))


@check("after the provider rotates its signing key, a new sign-in works (the coordinator's cached keys fetched again)")
def rotated_keys():
    stop_provider()
    log = start_provider("rotated")
    d = browser()
    signed_in(d, "bob")
    requests = [line.split()[:2] for line in open(log) if line.split()[:1] in (["GET"], ["POST"])]
    token = requests.index(["POST", "/token"])
    keys = [i for i, r in enumerate(requests) if r == ["GET", "/jwks"]]
    assert ["GET", "/.well-known/openid-configuration"] in requests[:token], "the start probed the provider"
    # The start kept the keys cached before the rotation; the new key in the token had them fetched again.
    assert keys and all(i > token for i in keys), requests


@check("with the provider down, sign-in says so and signed-in sessions keep working")
def provider_down():
    # Granted again, ann's session (which only lacked a grant) works again.
    admin_cli("grant-role", "--project", PROJECT, "--group", "baton-admins", "--role", "admin")
    ann.get(LIST)
    wait(ann, "the list", lambda d: d.find_elements(By.ID, "list-title"))
    stop_provider()
    bob.get(LIST)
    wait(bob, "the sign-in page", lambda d: "/sign-in" in d.current_url)
    bob.find_element(By.PARTIAL_LINK_TEXT, "organization's account").click()
    wait(bob, "the provider-down page", lambda d: "The identity provider did not answer" in text(d))
    shot(bob, "provider-down")
    ann.get(f"{LIST}/{run}")
    wait(ann, "the panel", lambda d: d.find_elements(By.ID, "panel"))


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
if provider["process"] is not None and provider["process"].poll() is None:
    provider["process"].terminate()
print(f"screenshots: {SHOTS}")
print(f"{len(results) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)

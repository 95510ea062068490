"""A tiny case runner shared by the MCP client tests (plain Python, no deps).

Each case prints `PASS <name>` or `FAIL <name>: <why>`; scripts/checks/mcp_clients.sh
counts those lines. The process exits 1 if any case failed.
"""

import json
import sys
import time
import traceback
import urllib.error
import urllib.request


def load_dev(path):
    with open(path) as f:
        return json.load(f)


class Cases:
    def __init__(self, suite):
        self.suite = suite
        self.failed = 0

    async def run(self, name, fn, *args):
        started = time.monotonic()
        try:
            await fn(*args)
        except Exception as e:  # noqa: BLE001 - every failure is reported, none is fatal
            self.failed += 1
            print(f"FAIL {self.suite}: {name}: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc(file=sys.stderr)
        else:
            print(f"PASS {self.suite}: {name} ({time.monotonic() - started:.1f} s)", flush=True)

    def exit(self):
        sys.exit(1 if self.failed else 0)


def rest(dev, method, path, token, body=None):
    """One REST call against the dev project; returns (status, json)."""
    url = dev["rest_base"] + path
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def saturate(dev, who="other_end_user", limit=500):
    """Fills `who`'s admission bound (principal concurrency) with long Demo.Sleep
    executions started over REST, until REST answers 429; returns their ids.
    Another user than the suites' own, so the suites running side by side keep
    their room."""
    user = dev["credentials"][who]
    body = {"gateway_id": dev["gateway_id"], "tool_name": "Demo.Sleep", "input": {"seconds": 600},
            "user_id": user["user_id"]}
    ids = []
    for _ in range(limit):
        status, reply = rest(dev, "POST", "/tool-executions", user["token"], body)
        if status == 429:
            return ids
        check(status in (200, 201, 202), f"start while saturating: {status} {reply}")
        ids.append(reply["execution_id"])
    raise AssertionError(f"no 429 after {limit} starts")


def release(dev, ids, who="other_end_user"):
    """Cancels what `saturate` started."""
    token = dev["credentials"][who]["token"]
    for eid in ids:
        rest(dev, "POST", f"/tool-executions/{eid}/cancel", token, {})

#!/usr/bin/env python3
"""MCP JSON-RPC fuzzer for Baton's /mcp/{gateway_id} endpoint, both eras.

Drives a running `baton dev` (see scripts/checks/mcp_fuzz.sh, which starts one)
with mutated valid messages, wrong types, huge and deeply nested values, invalid
JSON and UTF-8, batches, unknown methods and bad headers, in the legacy era
(2025-11-25 / 2025-06-18, `initialize` then `Mcp-Session-Id`) and the modern era
(2026-07-28: `_meta` envelope, `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`).

A case is one or a few HTTP requests. A case passes when every answer is
acceptable:
  - an HTTP status below 500;
  - an answer at all (no reset, no hang past the timeout);
  - JSON bodies parse, SSE `data:` lines parse;
  - every JSON-RPC error (top level, on an SSE stream, or inline in a task) has
    an integer code from the allowed list (--allowed-codes);
  - where the case is a pure, single defect with a known answer (body over the
    limit, foreign Host/Origin, missing Accept, invalid JSON, batches, missing
    credentials), that answer.
Across the run: the server process stays alive and its log never says
"panicked". The closing line is `mcp-fuzz: N passed, M failed`.

Case families (weights in GENERATORS): valid and mutated messages of each era
(initialize, ping, tools/list, tools/call of Demo.Echo / Demo.Sleep / Demo.Fail
and the compatibility tools with and without `task`, tasks/get, tasks/result,
tasks/cancel, tasks/list, tasks/update, server/discover, notifications, client
responses, unknown methods); header defects (Accept, Content-Type,
MCP-Protocol-Version, Mcp-Session-Id, Mcp-Method, Mcp-Name, Origin, Host,
duplicates, too many); credentials; invalid JSON / UTF-8; batches; nesting up
to 100,000 levels; bodies at and over the limit (also chunked); other HTTP
methods and paths; session lifecycles (initialize, use, DELETE, use again); and
input flows: a remote tool that asks for input (confirm_delete, multi_input)
answered with mutated answers through the MRTR retry, tasks/update, the legacy
client response, the compatibility tool and the tasks/result stream, then
cancelled. Two guards keep the server's capacity for the fuzzing itself:
`tame` caps Demo.Sleep at ~1.5 s and compatibility waits at 1 s, and input
flows cancel every execution they saw (unanswered input would hold a worker
slot for an hour).

Every case draws from its own random.Random(f"{seed}:{index}"), so a seed and a
case index name the same generated request again (ids harvested from earlier
answers are the only run-dependent input); `--only 17,42` runs just those
cases. Failing requests are printed and saved (credentials replaced by
placeholders) to --out; `--replay FILE` sends a saved request again against the
dev server named by --dev-json.

Python 3.11 standard library only; raw sockets (HTTP/1.1, keep-alive) so that
headers and bodies can be anything.
"""

from __future__ import annotations

import argparse
import base64
import collections
import copy
import json
import os
import random
import re
import socket
import sys
import threading
import time
import traceback
import urllib.parse

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
LEGACY_OLD = "2025-06-18"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
META_INFO = "io.modelcontextprotocol/clientInfo"
TASKS_EXT = "io.modelcontextprotocol/tasks"
RELATED = "io.modelcontextprotocol/related-task"
ACCEPT_OK = b"application/json, text/event-stream"
DEFAULT_BODY_LIMIT = 1 << 20
REQUEST_TIMEOUT = 90.0


# --------------------------------------------------------------------------
# A minimal HTTP/1.1 client over a raw socket.


class Response:
    __slots__ = ("status", "headers", "body", "error", "elapsed")

    def __init__(self):
        self.status = None  # int, or None when no answer arrived
        self.headers = []  # [(lowercase name, value str)]
        self.body = b""
        self.error = None  # str when the exchange failed
        self.elapsed = 0.0

    def _done(self, t0):
        self.elapsed = time.monotonic() - t0
        return self

    def header(self, name):
        for k, v in self.headers:
            if k == name:
                return v
        return None


class Conn:
    """One keep-alive connection; reconnects when the server closed it."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.sock = None
        self.rfile = None
        self.used = False

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = self.rfile = None
        self.used = False

    def _connect(self):
        self.close()
        s = socket.create_connection((self.host, self.port), timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.settimeout(REQUEST_TIMEOUT)
        self.sock = s
        self.rfile = s.makefile("rb")

    def request(self, method, target, headers, body=b"", chunked=False, first_event=False):
        """headers: [(bytes name, bytes value)], sent as given (Host included
        only if listed). Retries once when a reused connection turns out dead
        before any byte of an answer. With first_event, an SSE answer is read
        up to its first event only and the connection is dropped."""
        for attempt in (0, 1):
            fresh = self.sock is None or not self.used
            if self.sock is None:
                try:
                    self._connect()
                except OSError as e:
                    r = Response()
                    r.error = f"connect: {e}"
                    return r
            r = self._exchange(method, target, headers, body, chunked, first_event)
            if r.status is None and not fresh and attempt == 0 and r.error and "before any answer" in r.error:
                self.close()
                continue
            return r
        return r

    def _exchange(self, method, target, headers, body, chunked, first_event=False):
        r = Response()
        t0 = time.monotonic()
        head = [method.encode() + b" " + target + b" HTTP/1.1\r\n"]
        for k, v in headers:
            head.append(k + b": " + v + b"\r\n")
        if chunked:
            head.append(b"Transfer-Encoding: chunked\r\n")
            payload = b""
            step = 65536
            for i in range(0, len(body), step):
                part = body[i:i + step]
                payload += b"%x\r\n" % len(part) + part + b"\r\n"
            payload += b"0\r\n\r\n"
        else:
            if body or method in ("POST", "PUT", "PATCH"):
                head.append(b"Content-Length: %d\r\n" % len(body))
            payload = body
        head.append(b"\r\n")
        data = b"".join(head) + payload
        send_error = None
        self.used = True
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError, socket.timeout, OSError) as e:
            # The server may answer (413) and close before reading it all.
            send_error = e
        try:
            line = self.rfile.readline(65537)
            if not line:
                r.error = "connection closed before any answer" + (f" (send: {send_error})" if send_error else "")
                self.close()
                r.elapsed = time.monotonic() - t0
                return r
            parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
            r.status = int(parts[1])
            while True:
                h = self.rfile.readline(65537)
                if not h:
                    raise ConnectionError("closed inside headers")
                if h in (b"\r\n", b"\n"):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                r.headers.append((k.strip().lower(), v.strip()))
            te = (r.header("transfer-encoding") or "").lower()
            cl = r.header("content-length")
            if method == "HEAD" or r.status in (204, 304) or 100 <= r.status < 200:
                r.body = b""
            elif "chunked" in te:
                chunks = []
                sse = (r.header("content-type") or "").startswith("text/event-stream")
                while True:
                    if time.monotonic() - t0 > REQUEST_TIMEOUT:
                        raise TimeoutError(f"answer still streaming after {REQUEST_TIMEOUT:.0f} s")
                    if first_event and sse and any(carries_data(block) for block in b"".join(chunks).replace(b"\r\n", b"\n").split(b"\n\n")[:-1]):
                        # Enough: the first message is in (a priming event, an id with
                        # empty data, is not one). Hang up, as a client would.
                        self.close()
                        break
                    size_line = self.rfile.readline(1024)
                    if not size_line:
                        raise ConnectionError("closed inside a chunked body")
                    size = int(size_line.split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while True:
                            trailer = self.rfile.readline(65537)
                            if trailer in (b"\r\n", b"\n", b""):
                                break
                        break
                    chunk = self.rfile.read(size)
                    if len(chunk) < size:
                        raise ConnectionError("closed inside a chunk")
                    chunks.append(chunk)
                    self.rfile.readline(3)
                r.body = b"".join(chunks)
                if first_event:
                    return r._done(t0)
            elif cl is not None:
                n = int(cl)
                r.body = self.rfile.read(n)
                if len(r.body) < n:
                    raise ConnectionError("closed inside the body")
            else:
                r.body = self.rfile.read()
                self.close()
        except socket.timeout:
            r.error = f"timeout after {REQUEST_TIMEOUT:.0f} s" + (" (after the status line)" if r.status else "")
            self.close()
        except (ConnectionError, OSError, ValueError, IndexError, TimeoutError) as e:
            r.error = f"{type(e).__name__}: {e}" + (" (after the status line)" if r.status else "")
            self.close()
        r.elapsed = time.monotonic() - t0
        if self.sock is not None and (send_error or (r.header("connection") or "").lower() == "close"):
            self.close()
        return r


# --------------------------------------------------------------------------
# JSON emission with room for things json.dumps will not write.


class Raw:
    """Emitted verbatim (deep nesting, duplicate keys, odd number literals)."""

    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text


class DupObj:
    """An object serialized with repeated keys: a list of (key, value)."""

    __slots__ = ("items",)

    def __init__(self, items):
        self.items = items


def enc(v, ascii_only=True):
    if isinstance(v, Raw):
        return v.text
    if isinstance(v, DupObj):
        return "{" + ",".join(json.dumps(k, ensure_ascii=ascii_only) + ":" + enc(x, ascii_only) for k, x in v.items) + "}"
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(str(k), ensure_ascii=ascii_only) + ":" + enc(x, ascii_only) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(enc(x, ascii_only) for x in v) + "]"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=ascii_only)
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, float):
        return json.dumps(v)  # NaN / Infinity come out as invalid JSON, on purpose
    return str(v)


def to_bytes(v, rng):
    text = enc(v, ascii_only=rng.random() < 0.6)
    # Lone surrogates in non-ASCII output become CESU-8 bytes: invalid UTF-8.
    return text.encode("utf-8", "surrogatepass")


def serde_verdict(body):
    """Whether serde_json (the server's parser) reads body as JSON: True,
    False, or None when Python and serde might disagree (surrogate escapes,
    numbers beyond f64, very long digit runs, nesting past serde's 128)."""
    try:
        text = body.decode("utf-8")  # strict: invalid UTF-8 is invalid JSON for both
    except UnicodeDecodeError:
        return False
    if re.search(r"\\u[dD][89a-fA-F]", text):
        return None

    def no_const(c):
        raise ValueError(f"not JSON: {c}")

    def num(s):
        try:
            f = float(s)
        except (OverflowError, ValueError):
            raise LookupError("number")
        if f in (float("inf"), float("-inf")):
            raise LookupError("number")
        return f

    try:
        json.loads(text, parse_constant=no_const, parse_float=num, parse_int=num)
    except LookupError:
        return None
    except RecursionError:
        return None
    except ValueError as e:
        if "integer string conversion" in str(e) or "Exceeds the limit" in str(e):
            return None
        return False
    depth, stack = 0, 0
    for ch in re.sub(r'"(?:[^"\\]|\\.)*"', "", text):
        if ch in "[{":
            stack += 1
            depth = max(depth, stack)
        elif ch in "]}":
            stack -= 1
    if depth > 120:
        return None
    return True


# --------------------------------------------------------------------------
# Random values.

UNICODE_BITS = ["é", "日本", "😀", "\u0000", "\u202e", "\ufeff", "\ud800", "\udfff", "\u2028", "Ω" * 3, "\x7f", "\\", '"', "\n\t"]


def rand_text(rng, max_len=40):
    n = rng.choice([0, 1, 2, 5, 10, max_len])
    alphabet = "abcXYZ019 _-./:@%"
    s = "".join(rng.choice(alphabet) for _ in range(n))
    if rng.random() < 0.3:
        s += rng.choice(UNICODE_BITS)
    return s


def rand_scalar(rng):
    return rng.choice([
        None, True, False, 0, -1, 1, 7, 2**31, -(2**31) - 1, 2**53 + 1, 2**63, -(2**63), 2**64 + 1, 10**40,
        0.5, -0.0, 1.5e308, 5e-324, -1e-7, Raw("1e400"), Raw("-1e400"), Raw("1" * 400), Raw("0.0000000000000000000000001"),
        "", "0", "1", "true", "null", rand_text(rng), rand_text(rng, 300),
    ])


def rand_value(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.55:
        return rand_scalar(rng)
    if r < 0.75:
        return [rand_value(rng, depth + 1) for _ in range(rng.choice([0, 1, 3]))]
    if r < 0.95:
        return {rand_text(rng, 8): rand_value(rng, depth + 1) for _ in range(rng.choice([0, 1, 3]))}
    return DupObj([("k", rand_value(rng, depth + 1)), ("k", rand_value(rng, depth + 1))])


def other_type(rng, v):
    """A random value whose JSON type differs from v's."""
    def kind(x):
        if x is None:
            return "null"
        if isinstance(x, bool):
            return "bool"
        if isinstance(x, (int, float, Raw)):
            return "num"
        if isinstance(x, str):
            return "str"
        if isinstance(x, (list,)):
            return "arr"
        return "obj"
    for _ in range(20):
        w = rand_value(rng, 2)
        if kind(w) != kind(v):
            return w
    return None if v is not None else 0


def deep(rng, depth=None):
    depth = depth or rng.choice([64, 126, 127, 128, 129, 200, 1000, 10000, 100000])
    kind = rng.random()
    if kind < 0.6:
        return Raw("[" * depth + "]" * depth)
    if kind < 0.9:
        return Raw('{"a":' * depth + "1" + "}" * depth)
    return Raw("[" * depth)  # never closed


# --------------------------------------------------------------------------
# The world the fuzzer works in: credentials, sessions, known ids.


class World:
    def __init__(self, dev, body_limit):
        self.dev = dev
        u = urllib.parse.urlsplit(dev["mcp_url"])
        self.host, self.port = u.hostname, u.port
        self.authority = f"{u.hostname}:{u.port}".encode()
        self.path = u.path.encode()
        self.gateway_id = dev["gateway_id"]
        self.token = dev["credentials"]["end_user"]["token"]
        self.other_token = dev["credentials"]["other_end_user"]["token"]
        self.admin_key = dev["credentials"].get("admin_key", "btk_x")
        self.body_limit = body_limit
        self.sessions = {}  # name -> session id
        self.lock = threading.Lock()
        self.task_ids = collections.deque(maxlen=400)  # the dev user's executions
        self.other_task_ids = []
        self.seed_task_ids = []

    def remember(self, ids):
        with self.lock:
            for i in ids:
                if i not in self.task_ids:
                    self.task_ids.append(i)

    def some_task_id(self, rng):
        r = rng.random()
        with self.lock:
            pool = list(self.task_ids)
        if r < 0.55 and pool:
            return rng.choice(pool)
        if r < 0.65 and self.seed_task_ids:
            return rng.choice(self.seed_task_ids)
        if r < 0.72 and self.other_task_ids:
            return rng.choice(self.other_task_ids)
        return rng.choice([
            "te_" + "".join(rng.choice("abcdefghijkLMNOP0123456789") for _ in range(27)),
            "te_", "", "te_../../x", "TE_" + "A" * 27, "x" * 5000, "baton-input.te_x.a2V5", "0", "null",
            (rng.choice(pool) if pool else "te_a")[:-1] + "Z",
        ])

    def placeholders(self):
        out = [(self.token, "{{TOKEN}}"), (self.other_token, "{{OTHER_TOKEN}}"), (self.admin_key, "{{ADMIN_KEY}}")]
        for name, sid in self.sessions.items():
            out.append((sid, "{{SESSION_%s}}" % name.upper()))
        out.append((self.gateway_id, "{{GATEWAY}}"))
        out.append((self.authority.decode(), "{{AUTHORITY}}"))
        return out


ID_RE = re.compile(rb"te_[A-Za-z0-9]{20,40}")


def base_headers(world, *, auth=True, token=None):
    h = [
        (b"Host", world.authority),
        (b"Content-Type", b"application/json"),
        (b"Accept", ACCEPT_OK),
    ]
    if auth:
        h.append((b"Authorization", b"Bearer " + (token or world.token).encode()))
    return h


def header_text(value):
    """An MCP header value: plain when printable ASCII, else the base64 form."""
    if isinstance(value, str) and value and all(0x20 < ord(c) < 0x7F for c in value) and value.strip() == value:
        return value.encode()
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else b""
    return b"=?base64?" + base64.b64encode(raw) + b"?="


def name_field(method):
    return {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
            "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}.get(method)


def modern_headers(world, msg, **kw):
    h = base_headers(world, **kw)
    h.append((b"MCP-Protocol-Version", MODERN.encode()))
    if isinstance(msg, dict):
        method = msg.get("method")
        if isinstance(method, str):
            h.append((b"Mcp-Method", header_text(method)))
            field = name_field(method)
            params = msg.get("params")
            if field and isinstance(params, dict) and isinstance(params.get(field), str):
                h.append((b"Mcp-Name", header_text(params[field])))
    return h


def legacy_headers(world, session="tasks", version=None, **kw):
    h = base_headers(world, **kw)
    if session:
        h.append((b"Mcp-Session-Id", world.sessions[session].encode()))
        v = version or (LEGACY_OLD if session == "old" else LEGACY)
        h.append((b"MCP-Protocol-Version", v.encode()))
    return h


def set_header(headers, name, value):
    """Replaces (or, with value None, removes) every header called name."""
    low = name.lower()
    out = [(k, v) for k, v in headers if k.lower() != low]
    if value is not None:
        out.append((name, value))
    return out


# --------------------------------------------------------------------------
# Valid message templates.

TOOL_NAMES_ODD = ["demo.echo", "Demo.Echo ", "Demo", "Demo.Echo\u0000", "Baton_", "Baton_Nope", "../Demo.Echo",
                  "x" * 300, "Demo.Éсho", "", "Demo.Echo/../Demo.Sleep"]
UNKNOWN_METHODS = ["resources/list", "resources/read", "prompts/list", "prompts/get", "logging/setLevel",
                   "completion/complete", "sampling/createMessage", "elicitation/create", "roots/list",
                   "subscriptions/listen", "tools/list/", "TOOLS/LIST", "tools/call ", "rpc.discover", "",
                   "notifications", "tasks/", "tasks/get/x", "\u0000", "m" * 2000, "tasks/update", "server/discover",
                   "tasks/result", "tasks/list", "ping", "initialize"]


def sleep_seconds(rng):
    return rng.choice([0, 0.01, 0.05, 0.2, 0.5, 1])


def tool_call_params(world, rng, era):
    r = rng.random()
    if r < 0.45:
        p = {"name": "Demo.Echo", "arguments": {"text": rand_text(rng, 60)}}
    elif r < 0.75:
        p = {"name": "Demo.Sleep", "arguments": {"seconds": sleep_seconds(rng)}}
    elif r < 0.78:
        p = {"name": "Demo.Fail", "arguments": {"times": rng.choice([0, 1]), "retryable": False}}
    elif r < 0.84:
        p = {"name": "Baton_GetToolExecution", "arguments": {"execution_id": world.some_task_id(rng), "wait_ms": rng.choice([0, 10, 500])}}
    elif r < 0.88:
        p = {"name": "Baton_ListToolExecutions", "arguments": rng.choice([{}, {"limit": 5}, {"cursor": rand_text(rng)}])}
    elif r < 0.92:
        p = {"name": "Baton_CancelToolExecution", "arguments": {"execution_id": world.some_task_id(rng)}}
    elif r < 0.95:
        p = {"name": "Baton_ProvideToolExecutionInput", "arguments": {
            "execution_id": world.some_task_id(rng), "request_key": rand_text(rng, 8),
            "response": {"action": rng.choice(["accept", "decline", "cancel"]), "content": {}}}}
    else:
        p = {"name": rng.choice(TOOL_NAMES_ODD), "arguments": {}}
    if era == "legacy" and rng.random() < 0.4:
        p["task"] = rng.choice([{}, {"ttl": 60000}, {"ttl": 1}])
    if era == "modern" and rng.random() < 0.1:
        p["requestState"] = world.some_task_id(rng)
        if rng.random() < 0.5:
            p["inputResponses"] = {rand_text(rng, 6): {"action": "accept", "content": {"x": 1}}}
    if rng.random() < 0.15:
        p["_meta"] = {"progressToken": rng.choice([1, "p", rand_text(rng)])}
    return p


def legacy_message(world, rng):
    """(message dict, session name)"""
    session = rng.choices(["tasks", "plain", "old"], [0.7, 0.15, 0.15])[0]
    r = rng.random()
    mid = rng.choice([1, 2, 99, "a", "req-" + rand_text(rng, 6), 0, -5])
    if r < 0.08:
        msg = {"jsonrpc": "2.0", "id": mid, "method": "ping"}
        if rng.random() < 0.5:
            msg["params"] = {}
    elif r < 0.18:
        msg = {"jsonrpc": "2.0", "id": mid, "method": "tools/list", "params": rng.choice([{}, {"cursor": "x"}])}
    elif r < 0.48:
        msg = {"jsonrpc": "2.0", "id": mid, "method": "tools/call", "params": tool_call_params(world, rng, "legacy")}
    elif r < 0.72:
        m = rng.choice(["tasks/get", "tasks/get", "tasks/result", "tasks/cancel"])
        msg = {"jsonrpc": "2.0", "id": mid, "method": m, "params": {"taskId": world.some_task_id(rng)}}
    elif r < 0.78:
        msg = {"jsonrpc": "2.0", "id": mid, "method": "tasks/list", "params": rng.choice([{}, {"cursor": rand_text(rng)}])}
    elif r < 0.84:
        msg = initialize_message(rng, mid)
    elif r < 0.91:
        msg = notification(rng, modern=False)
    elif r < 0.95:
        msg = client_response(world, rng)
    else:
        msg = {"jsonrpc": "2.0", "id": mid, "method": rng.choice(UNKNOWN_METHODS), "params": {}}
    return msg, session


def initialize_message(rng, mid=1):
    caps = rng.choice([{}, {"tasks": {}}, {"elicitation": {}}, {"tasks": {}, "elicitation": {}},
                       {"tasks": {"list": {}, "cancel": {}, "requests": {"elicitation": {"create": {}}}}}])
    return {"jsonrpc": "2.0", "id": mid, "method": "initialize", "params": {
        "protocolVersion": rng.choice([LEGACY, LEGACY, LEGACY_OLD, "2025-03-26", "2024-11-05", MODERN, "1999-01-01", ""]),
        "capabilities": caps,
        "clientInfo": {"name": "mcp-fuzz", "version": "1.0"}}}


def notification(rng, modern):
    m = rng.choice(["notifications/initialized", "notifications/cancelled", "notifications/progress",
                    "notifications/roots/list_changed", "notifications/tasks/status", "notifications/unknown"])
    params = {"notifications/cancelled": {"requestId": 1, "reason": "fuzz"},
              "notifications/progress": {"progressToken": 1, "progress": 0.5}}.get(m, {})
    msg = {"jsonrpc": "2.0", "method": m}
    if params or rng.random() < 0.5:
        msg["params"] = dict(params)
    if modern and rng.random() < 0.7:
        msg.setdefault("params", {})["_meta"] = modern_meta(rng)
    return msg


def client_response(world, rng):
    tid = world.some_task_id(rng)
    rid = rng.choice([
        "baton-input." + tid + "." + base64.urlsafe_b64encode(rand_text(rng, 8).encode("utf-8", "surrogatepass")).decode().rstrip("="),
        "baton-input." + tid + ".!!", "baton-input.", 1, "task-1",
    ])
    if rng.random() < 0.7:
        return {"jsonrpc": "2.0", "id": rid, "result": rng.choice([
            {"action": "accept", "content": {"name": "x"}}, {"action": "decline"}, {"action": "nope"}, {}])}
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": -1, "message": "no"}}


def modern_meta(rng):
    caps = rng.choice([{}, {"extensions": {TASKS_EXT: {}}}, {"extensions": {TASKS_EXT: {}}, "elicitation": {}},
                       {"elicitation": {}}, {"sampling": {}}, {"extensions": {}}])
    meta = {META_VERSION: MODERN, META_CAPS: caps}
    if rng.random() < 0.5:
        meta[META_INFO] = {"name": "mcp-fuzz", "version": "1.0"}
    return meta


def modern_message(world, rng):
    r = rng.random()
    mid = rng.choice([1, 2, 99, "a", "req-" + rand_text(rng, 6), 0, -5])
    meta = modern_meta(rng)
    if r < 0.1:
        msg = {"jsonrpc": "2.0", "id": mid, "method": "server/discover", "params": {}}
    elif r < 0.2:
        msg = {"jsonrpc": "2.0", "id": mid, "method": "tools/list", "params": {}}
    elif r < 0.5:
        msg = {"jsonrpc": "2.0", "id": mid, "method": "tools/call", "params": tool_call_params(world, rng, "modern")}
    elif r < 0.75:
        m = rng.choice(["tasks/get", "tasks/get", "tasks/cancel", "tasks/update"])
        params = {"taskId": world.some_task_id(rng)}
        if m == "tasks/update":
            params["inputResponses"] = rng.choice([{}, {rand_text(rng, 6): {"action": "accept", "content": {}}}])
        msg = {"jsonrpc": "2.0", "id": mid, "method": m, "params": params}
        if rng.random() < 0.8:
            meta[META_CAPS] = {"extensions": {TASKS_EXT: {}}}
    elif r < 0.8:
        msg = {"jsonrpc": "2.0", "id": mid, "method": rng.choice(["tasks/result", "tasks/list", "ping", "initialize"]),
               "params": {"taskId": world.some_task_id(rng)}}
    elif r < 0.9:
        return notification(rng, modern=True)
    else:
        msg = {"jsonrpc": "2.0", "id": mid, "method": rng.choice(UNKNOWN_METHODS), "params": {}}
    msg.setdefault("params", {})["_meta"] = meta
    return msg


# --------------------------------------------------------------------------
# Mutation.


def paths(v, prefix=()):
    """Every (container, key) below v."""
    out = []
    if isinstance(v, dict):
        for k in list(v):
            out.append((v, k))
            out.extend(paths(v[k]))
    elif isinstance(v, list):
        for i in range(len(v)):
            out.append((v, i))
            out.extend(paths(v[i]))
    return out


def mutate(world, rng, msg, era):
    """Applies 1-3 mutations in place; returns the (possibly new) message and a label."""
    labels = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        ps = paths(msg)
        op = rng.random()
        if not ps or op < 0.08:
            top = rng.choice(["jsonrpc", "id", "method", "params"])
            if rng.random() < 0.5 and top in msg:
                del msg[top]
                labels.append(f"drop {top}")
            else:
                msg[top] = rand_value(rng)
                labels.append(f"{top}=rand")
            continue
        container, key = rng.choice(ps)
        if op < 0.45:
            container[key] = other_type(rng, container[key])
            labels.append(f"type[{key}]")
        elif op < 0.55 and isinstance(container, dict):
            del container[key]
            labels.append(f"drop[{key}]")
        elif op < 0.65:
            target = container[key]
            if isinstance(target, dict):
                target[rng.choice(["_meta", "task", "extra", "taskId", "name", "arguments", rand_text(rng, 6)])] = rand_value(rng)
                labels.append(f"add[{key}]")
            else:
                container[key] = rand_value(rng)
                labels.append(f"rand[{key}]")
        elif op < 0.72:
            container[key] = "x" * rng.choice([1000, 10000, 100000, 500000])
            labels.append(f"long[{key}]")
        elif op < 0.77:
            container[key] = deep(rng, rng.choice([100, 127, 128, 10000]))
            labels.append(f"deep[{key}]")
        elif op < 0.85:
            container[key] = rng.choice(UNICODE_BITS) * rng.choice([1, 3, 100])
            labels.append(f"unicode[{key}]")
        elif op < 0.9 and isinstance(container, dict):
            items = list(container.items()) + [(key, rand_value(rng))]
            rng.shuffle(items)
            # Replace the container by a duplicate-key object inside its parent.
            dup = DupObj(items)
            if container is msg:
                labels.append("dupkey[root]")
                return dup, ",".join(labels)
            for c2, k2 in paths(msg):
                if c2[k2] is container:
                    c2[k2] = dup
                    break
            labels.append(f"dupkey[{key}]")
        elif op < 0.95:
            msg["method"] = rng.choice(["initialize", "ping", "tools/list", "tools/call", "tasks/get", "tasks/result",
                                        "tasks/cancel", "tasks/list", "tasks/update", "server/discover"]
                                       + UNKNOWN_METHODS[:4])
            labels.append("method-swap")
        else:
            container[key] = world.some_task_id(rng)
            labels.append(f"taskid[{key}]")
    return msg, ",".join(labels)


def tame(msg):
    """Keeps mutated calls from parking workers: Demo.Sleep runs at most ~1.5 s
    and compatibility waits at most 1 s. Everything else is left as mutated."""
    if not isinstance(msg, dict) or msg.get("method") != "tools/call":
        return
    p = msg.get("params")
    if not isinstance(p, dict) or not isinstance(p.get("arguments"), dict):
        return
    a = p["arguments"]
    if p.get("name") == "Demo.Sleep":
        s = a.get("seconds")
        if isinstance(s, (int, float)) and not isinstance(s, bool) and 1.5 < s <= 86400:
            a["seconds"] = 0.05
    if p.get("name") == "Baton_GetToolExecution":
        w = a.get("wait_ms")
        if isinstance(w, (int, float)) and not isinstance(w, bool) and 1000 < w <= 45000:
            a["wait_ms"] = 1000
    if p.get("name") == "Demo.Fail":
        t = a.get("times")
        if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 1:
            a["times"] = 1


# --------------------------------------------------------------------------
# Cases. A case is a list of Step; each Step is one HTTP request plus what its
# answer must be (beyond the general rules).


class Step:
    __slots__ = ("method", "target", "headers", "body", "chunked", "expect_status", "expect_code", "note", "then", "first_event")

    def __init__(self, method, target, headers, body=b"", *, chunked=False, expect_status=None, expect_code=None, note="", first_event=False):
        self.first_event = first_event
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
        self.chunked = chunked
        self.expect_status = expect_status  # set of int or None
        self.expect_code = expect_code  # set of int or None (top-level JSON-RPC error code)
        self.note = note
        self.then = None  # callable(world, response) -> extra steps


def post(world, headers, body, **kw):
    return Step("POST", world.path, headers, body, **kw)


def gen_legacy_valid(world, rng):
    msg, session = legacy_message(world, rng)
    tame(msg)
    return "legacy-valid", [post(world, legacy_headers(world, session), to_bytes(msg, rng), note=str(msg.get("method")))]


def gen_modern_valid(world, rng):
    msg = modern_message(world, rng)
    tame(msg)
    return "modern-valid", [post(world, modern_headers(world, msg), to_bytes(msg, rng), note=str(msg.get("method")))]


def gen_legacy_mutate(world, rng):
    msg, session = legacy_message(world, rng)
    msg, label = mutate(world, rng, msg, "legacy")
    tame(msg)
    return "legacy-mutate", [post(world, legacy_headers(world, session), to_bytes(msg, rng), note=label)]


def gen_modern_mutate(world, rng):
    msg = modern_message(world, rng)
    original = copy.deepcopy(msg) if rng.random() < 0.15 else None
    msg, label = mutate(world, rng, msg, "modern")
    tame(msg)
    headers = modern_headers(world, original if original is not None else msg)
    return "modern-mutate", [post(world, headers, to_bytes(msg, rng), note=label + (" (headers of the original)" if original else ""))]


def valid_pair(world, rng):
    """(era, message, headers) of a valid request whose answer is known to
    pass authentication and the envelope: tools/list or ping."""
    if rng.random() < 0.5:
        msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta(rng)}}
        return "modern", msg, modern_headers(world, msg)
    msg = {"jsonrpc": "2.0", "id": 1, "method": rng.choice(["ping", "tools/list"])}
    return "legacy", msg, legacy_headers(world, "tasks")


BAD_HEADER_VALUES = [b"", b" ", b"\xff\xfe", b"caf\xe9", b"=?base64?!!?=", b"=?base64?/w==?=", b"=?base64??=",
                     b"x" * 9000, b"2026-07-28 ", b"\t2026-07-28", b"null", b"*", b"a,b", b"=?base64?MjAyNi0wNy0yOA==?="]


def gen_headers(world, rng):
    era, msg, headers = valid_pair(world, rng)
    body = to_bytes(msg, rng)
    which = rng.choice(["accept", "content-type", "version", "session", "origin", "host", "method-hdr", "name-hdr", "dup", "junk"])
    es = None
    ec = None
    if which == "accept":
        v = rng.choice([None, b"application/json", b"text/event-stream", b"*/*", b"application/*, text/*", b"text/html",
                        b"application/json, text/event-stream;q=0", b"application/json;q=0, text/event-stream",
                        b"APPLICATION/JSON, TEXT/EVENT-STREAM", b"\xff", b",,,", b"application/json;q=0.5, text/event-stream;q=0.1"])
        headers = set_header(headers, b"Accept", v)
        if v in (None, b"application/json", b"text/event-stream", b"text/html", b"\xff", b",,,",
                 b"application/json, text/event-stream;q=0", b"application/json;q=0, text/event-stream"):
            es = {406}
    elif which == "content-type":
        v = rng.choice([None, b"text/plain", b"application/json; charset=utf-8", b"APPLICATION/JSON", b"application/jsonx",
                        b"application/json-rpc", b"\xff", b"", b"multipart/form-data; boundary=x", b"application/json;;;"])
        headers = set_header(headers, b"Content-Type", v)
        if v in (None, b"text/plain", b"application/jsonx", b"application/json-rpc", b"\xff", b"", b"multipart/form-data; boundary=x"):
            es = {415}
    elif which == "version":
        v = rng.choice([None, b"2025-11-25", b"2025-06-18", b"2026-07-28", b"2024-11-05", b"2099-01-01"] + BAD_HEADER_VALUES)
        headers = set_header(headers, b"MCP-Protocol-Version", v)
    elif which == "session":
        sid = world.sessions["tasks"]
        v = rng.choice([None, b"", sid[:-1].encode(), (sid[:-2] + ("A" if sid[-2] != "A" else "B") + sid[-1]).encode(),
                        sid.encode() + b"A", world.sessions["other"].encode(), world.sessions["dead"].encode(),
                        b"bs1.", b"bs1." + b"A" * 500, b"=?base64?" + base64.b64encode(sid.encode()) + b"?="] + BAD_HEADER_VALUES)
        headers = set_header(headers, b"Mcp-Session-Id", v)
        if era == "legacy" and v is not None and v in (world.sessions["other"].encode(), world.sessions["dead"].encode()):
            es = {404}
    elif which == "origin":
        v = rng.choice([b"http://evil.example.com", b"null", b"file://", b"http://localhost.evil.com", b"https://127.0.0.1.nip.io",
                        b"http://user@localhost", b"ftp://localhost", b"http://localhost", b"http://127.0.0.1:1", b"http://[::1]:9",
                        b"\xff", b"http://", b"HTTP://LOCALHOST"])
        headers = set_header(headers, b"Origin", v)
        if v in (b"http://evil.example.com", b"null", b"file://", b"http://localhost.evil.com", b"https://127.0.0.1.nip.io",
                 b"http://user@localhost", b"ftp://localhost", b"\xff", b"http://"):
            es = {403}
    elif which == "host":
        v = rng.choice([b"evil.example.com", b"localhost.evil.com", b"localhost", b"[::1]:80", b"127.0.0.1",
                        b"user@localhost", b"", b"\xff", b"localhost:abc", None])
        headers = set_header(headers, b"Host", v)
        if v in (b"evil.example.com", b"localhost.evil.com", b"user@localhost", b"\xff"):
            es = {403}
    elif which == "method-hdr":
        v = rng.choice([None, b"tools/call", b"TOOLS/LIST", b"=?base64?dG9vbHMvbGlzdA==?=", b" tools/list "] + BAD_HEADER_VALUES)
        headers = set_header(headers, b"Mcp-Method", v)
        if era == "modern" and v in (None, b"tools/call", b"TOOLS/LIST", b"\xff\xfe", b"=?base64?!!?="):
            ec = {-32020}
    elif which == "name-hdr":
        v = rng.choice([b"Demo.Echo", b"=?base64?RGVtby5FY2hv?="] + BAD_HEADER_VALUES)
        headers = set_header(headers, b"Mcp-Name", v)
    elif which == "dup":
        name = rng.choice([b"Authorization", b"Accept", b"Content-Type", b"MCP-Protocol-Version", b"Mcp-Session-Id", b"Mcp-Method", b"Host"])
        extra = rng.choice([b"x", b"Bearer " + world.other_token.encode(), b"2026-07-28", b"application/json", b"tools/list"])
        headers = headers + [(name, extra)]
    else:
        for _ in range(rng.choice([1, 10, 90, 120])):
            headers.append((b"X-Fuzz-" + rand_text(rng, 6).encode("ascii", "ignore").replace(b" ", b"_").replace(b":", b"_") + b"a",
                            rand_text(rng).encode("utf-8", "surrogatepass").replace(b"\r", b"").replace(b"\n", b"").replace(b"\x00", b"")))
    return f"headers-{era}", [post(world, headers, body, expect_status=es, expect_code=ec, note=f"{which}")]


def gen_auth(world, rng):
    era, msg, headers = valid_pair(world, rng)
    choice = rng.choice(["none", "empty", "basic", "garbage", "other", "admin", "lower", "long", "nonascii", "twice"])
    v = {"none": None, "empty": b"Bearer ", "basic": b"Basic dXNlcjpwYXNz", "garbage": b"Bearer bteu_" + b"A" * 43,
         "other": b"Bearer " + world.other_token.encode(), "admin": b"Bearer " + world.admin_key.encode(),
         "lower": b"bearer " + world.token.encode(), "long": b"Bearer " + b"x" * 8000, "nonascii": b"Bearer \xff\xfe",
         "twice": b"Bearer " + world.token.encode() + b" " + world.token.encode()}[choice]
    headers = set_header(headers, b"Authorization", v)
    es = None
    if choice in ("none", "empty", "basic", "garbage", "long", "nonascii"):
        es = {401}
    if choice == "other" and era == "legacy":
        es = {404}  # another principal's session reads as unknown
    if era == "legacy" and rng.random() < 0.3:
        # initialize itself, without the right credentials
        msg = initialize_message(rng)
        headers = set_header(headers, b"Mcp-Session-Id", None)
        headers = set_header(headers, b"MCP-Protocol-Version", None)
        es = {401} if choice in ("none", "empty", "basic", "garbage", "long", "nonascii") else None
    return f"auth-{era}", [post(world, headers, to_bytes(msg, rng), expect_status=es, note=choice)]


RAW_BAD = [
    b"", b" ", b"{", b"}", b"[", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",}",
    b"{'jsonrpc':'2.0','id':1,'method':'ping'}", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}garbage",
    b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}",
    b"// comment\n{}", b"{\"id\":NaN}", b"{\"id\":Infinity}", b"{\"id\":-}", b"{\"id\":01}", b"{\"id\":1.}", b"{\"id\":.5}",
    b"{\"a\":\"\x00\"}", b"{\"a\":\"\t\"}", b"{\"a\":\"\\x41\"}", b"{\"a\":\"\\u12\"}", b"\x00", b"\xef\xbb\xbf{}",
    b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\xff\"}", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xc3\x28\"}",
    b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xc0\xaf\"}", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xed\xa0\x80\"}",
    b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xf4\x90\x80\x80\"}", b"{\"a\":\"\\ud800\"}", b"{\"a\":\"\\udc00\\ud800\"}",
    b"{\"a\":1e99999}", b"{\"a\":" + b"9" * 5000 + b"}", b"{\"a\":-" + b"9" * 5000 + b".5e-99999}",
    b"\xff\xfe{\x00}\x00", b"\xfe\xff\x00{\x00}", b"null", b"true", b"1", b"\"ping\"", b"[]", b"{}",
    b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\x00", b"\r\n\t {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} \r\n",
]


def gen_raw(world, rng):
    era, msg, headers = valid_pair(world, rng)
    r = rng.random()
    if r < 0.6:
        body = rng.choice(RAW_BAD)
    elif r < 0.8:
        good = to_bytes(msg, rng)
        cut = rng.randrange(0, len(good))
        body = good[:cut]
    else:
        good = bytearray(to_bytes(msg, rng))
        for _ in range(rng.choice([1, 2, 5])):
            good[rng.randrange(len(good))] = rng.randrange(256)
        body = bytes(good)
    ec, es = None, None
    if serde_verdict(body) is False:
        ec, es = {-32700}, {400}
    return f"raw-{era}", [post(world, headers, body, expect_status=es, expect_code=ec, note=repr(body[:40]))]


def gen_batch(world, rng):
    era, msg, headers = valid_pair(world, rng)
    items = [msg] * rng.choice([0, 1, 2, 50]) + [rand_value(rng) for _ in range(rng.choice([0, 1, 3]))]
    if era == "legacy" and rng.random() < 0.3:
        items = [initialize_message(rng)] + items
    body = to_bytes(items, rng)
    known = serde_verdict(body) is True
    return f"batch-{era}", [post(world, headers, body, expect_status={400} if known else None,
                                 expect_code={-32600} if known else None, note=f"{len(items)} items")]


def gen_deep(world, rng):
    era, msg, headers = valid_pair(world, rng)
    where = rng.choice(["params", "id", "root", "arguments", "meta"])
    d = deep(rng)
    if where == "params":
        msg["params"] = d if rng.random() < 0.3 else {**msg.get("params", {}), "x": d}
    elif where == "id":
        msg["id"] = d
    elif where == "root":
        body = d.text.encode()
        return f"deep-{era}", [post(world, headers, body, note=f"root {len(body)} bytes")]
    elif where == "arguments":
        msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "Demo.Echo", "arguments": {"text": "x", "nest": d}}}
        if era == "modern":
            msg["params"]["_meta"] = modern_meta(rng)
            headers = modern_headers(world, msg)
    else:
        if era == "modern":
            msg["params"]["_meta"]["deep"] = d
        else:
            msg["params"] = {"_meta": {"deep": d}}
    return f"deep-{era}", [post(world, headers, to_bytes(msg, rng), note=where)]


def gen_huge(world, rng):
    era, msg, headers = valid_pair(world, rng)
    limit = world.body_limit
    r = rng.random()
    chunked = rng.random() < 0.25
    if r < 0.5:
        # over the limit: 413, whatever the body
        size = limit + rng.choice([1, 2, 1000, limit])
        kind = rng.choice(["string", "garbage", "spaces"])
        if kind == "string":
            pad = size - len(to_bytes(msg, random.Random(0))) - 20
            msg = dict(msg)
            msg["params"] = {**(msg.get("params") or {}), "pad": "y" * max(pad, 0)}
            body = to_bytes(msg, rng)
            if len(body) <= limit:
                body += b" " * (limit + 1 - len(body))
        elif kind == "garbage":
            body = bytes(rng.randrange(256) for _ in range(256)) * (size // 256 + 1)
        else:
            body = to_bytes(msg, rng) + b" " * size
        return f"huge-{era}", [post(world, headers, body, chunked=chunked, expect_status={413}, note=f"{kind} {len(body)} bytes over {limit}")]
    # at or just under the limit
    where = rng.choice(["pad", "echo", "method", "id", "taskid"])
    room = limit - rng.choice([0, 1, 100, 5000]) - 400
    if where == "echo":
        msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "Demo.Echo", "arguments": {"text": "z" * room}}}
    elif where == "method":
        msg = dict(msg, method="m" * room)
    elif where == "id":
        msg = dict(msg, id="i" * room)
    elif where == "taskid":
        msg = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": "te_" + "q" * room}}
    else:
        msg = dict(msg)
        msg["params"] = {**(msg.get("params") or {}), "pad": ["p" * 1000] * (room // 1004)}
    if era == "modern":
        msg.setdefault("params", {})
        if isinstance(msg["params"], dict):
            msg["params"]["_meta"] = {META_VERSION: MODERN, META_CAPS: {"extensions": {TASKS_EXT: {}}}}
        headers = modern_headers(world, msg)
        if where == "method":
            headers = set_header(headers, b"Mcp-Method", b"m")  # 1 MB header values are refused by the HTTP layer
        if where == "taskid":
            headers = set_header(headers, b"Mcp-Name", b"te_q")
    body = to_bytes(msg, rng)
    es = {413} if len(body) > limit else None
    return f"huge-{era}", [post(world, headers, body, chunked=chunked, expect_status=es, note=f"{where} {len(body)} bytes (limit {limit})")]


def gen_http(world, rng):
    era, msg, headers = valid_pair(world, rng)
    body = to_bytes(msg, rng)
    r = rng.random()
    if r < 0.35:
        method = rng.choice(["GET", "PUT", "PATCH", "OPTIONS", "HEAD", "TRACE", "FUZZ"])
        es = {405} if method in ("GET", "PUT", "PATCH") else None
        return f"http-{era}", [Step(method, world.path, headers, body if method != "GET" else b"", expect_status=es, note=method)]
    if r < 0.75:
        gw = world.gateway_id
        target = rng.choice([b"/mcp/gw_doesnotexist0000000", b"/mcp/", b"/mcp", world.path + b"/", world.path + b"/extra",
                             world.path + b"?x=1&y=%ff", b"/mcp/" + gw.upper().encode(), b"/mcp/" + urllib.parse.quote(gw, safe="").encode().replace(b"g", b"%67"),
                             b"/mcp/" + b"g" * 5000, b"/mcp/%00", b"/mcp/..%2f..%2fv1", b"/MCP/" + gw.encode(), b"//mcp/" + gw.encode(),
                             b"/mcp/" + gw.encode() + b"%20", b"/mcp/\xff"])
        return f"http-{era}", [Step("POST", target, headers, body, note=repr(target[:60]))]
    # DELETE with odd sessions
    sid = rng.choice([None, b"", b"bs1.x", world.sessions["other"].encode(), world.sessions["dead"].encode(), b"\xff"])
    h = set_header(base_headers(world), b"Mcp-Session-Id", sid)
    es = {405} if sid is None else None
    return "http-delete", [Step("DELETE", world.path, h, b"", expect_status=es, note=f"DELETE session={sid!r:.40}")]


def gen_session_flow(world, rng):
    """initialize, maybe use the session, maybe DELETE it, maybe use it after."""
    msg = initialize_message(rng, rng.choice([1, "init"]))
    if rng.random() < 0.4:
        msg, _ = mutate(world, rng, msg, "legacy")
    headers = base_headers(world, token=rng.choice([world.token, world.token, world.other_token]))
    if rng.random() < 0.3:
        headers.append((b"MCP-Protocol-Version", rng.choice([b"2025-11-25", b"2025-06-18", b"2099-01-01", b"\xff"])))
    first = post(world, headers, to_bytes(msg, rng), note="initialize")
    plan = [rng.random() < 0.8, rng.random() < 0.5, rng.random() < 0.7]
    follow_seed = rng.randrange(1 << 30)

    def then(world, resp):
        sid = resp.header("mcp-session-id")
        if not sid:
            return []
        frng = random.Random(follow_seed)
        h = set_header(headers, b"Mcp-Session-Id", sid.encode())
        try:
            version = json.loads(resp.body)["result"]["protocolVersion"]
        except (ValueError, KeyError, TypeError):
            return []
        h = set_header(h, b"MCP-Protocol-Version", str(version).encode())
        steps = []
        if plan[0]:
            m = frng.choice(["ping", "tools/list", "tasks/list", "notifications/initialized"])
            body = {"jsonrpc": "2.0", "method": m} if m.startswith("notifications/") else {"jsonrpc": "2.0", "id": 2, "method": m}
            steps.append(post(world, h, to_bytes(body, frng), note=f"{m} in the new session"))
        if plan[1]:
            steps.append(Step("DELETE", world.path, h, b"", expect_status={204}, note="DELETE the session"))
            if plan[2]:
                steps.append(post(world, h, b'{"jsonrpc":"2.0","id":3,"method":"ping"}', expect_status={404}, note="ping after DELETE"))
        return steps

    first.then = then
    return "session-flow", [first]


def mutate_tree(rng, root, rounds=None):
    """Mutates any JSON value (1-3 changes); returns the new value."""
    holder = {"v": root}
    for _ in range(rounds or rng.choice([1, 1, 2, 3])):
        container, key = rng.choice(paths(holder))
        op = rng.random()
        if op < 0.35:
            container[key] = other_type(rng, container[key])
        elif op < 0.5 and isinstance(container, dict) and container is not holder:
            del container[key]
        elif op < 0.62:
            target = container[key]
            if isinstance(target, dict):
                target[rng.choice(["action", "content", "confirm", "name", rand_text(rng, 6)])] = rand_value(rng)
            else:
                container[key] = rand_value(rng)
        elif op < 0.7:
            container[key] = "x" * rng.choice([1000, 100000, 700000])
        elif op < 0.8:
            container[key] = deep(rng, rng.choice([60, 100, 115, 118, 120, 122, 124, 126, 130, 10000]))
        elif op < 0.9:
            container[key] = rng.choice(UNICODE_BITS) * rng.choice([1, 3])
        else:
            container[key] = rng.choice(["accept", "decline", "cancel", "ACCEPT", "", None, True, {"confirm": "yes"}])
    return holder["v"]


def input_responses(rng, keys):
    """Answers for the open input requests: valid ones, then mutated."""
    answers = {}
    for k in keys:
        if rng.random() < 0.85:
            answers[k] = {"action": rng.choice(["accept", "accept", "decline", "cancel"]),
                          "content": {"confirm": rng.choice([True, False]), "name": rand_text(rng, 10)}}
    if rng.random() < 0.2:
        answers["ir_" + rand_text(rng, 10)] = {"action": "accept", "content": {}}
    if rng.random() < 0.75:
        answers = mutate_tree(rng, answers)
    return answers


def modern_call(world, name, params, caps):
    msg = {"jsonrpc": "2.0", "id": 7, "method": name, "params": dict(params)}
    msg["params"]["_meta"] = {META_VERSION: MODERN, META_CAPS: caps}
    return msg


EXT = {"extensions": {TASKS_EXT: {}}}


def gen_input_flow(world, rng):
    """A tool that asks for input (the example remote server's confirm_delete
    or multi_input), then mutated answers through every door: the MRTR retry,
    tasks/update, the legacy client response, the compatibility tool, and a
    legacy tasks/result stream; always cancelled at the end."""
    tool = rng.choice(["confirm_delete", "multi_input"])
    args = {"filename": "/tmp/" + rand_text(rng, 8)} if tool == "confirm_delete" else {}
    fseed = rng.randrange(1 << 30)
    era = rng.choice(["modern", "modern", "legacy"])
    state = {"polls": 0, "eid": None, "rs": None, "keys": None, "done": False}

    def cleanup(world, seen_ids):
        """Cancels every execution this case saw: an unanswered input request
        would otherwise hold a worker slot until its retention ends. An MRTR
        round names its execution only inside the sealed requestState, so that
        one is ended by answering every question `cancel` through a retry."""
        steps = []
        if isinstance(state["rs"], str) and state["keys"]:
            answers = {k: {"action": "cancel"} for k in state["keys"]}
            msg = modern_call(world, "tools/call", {"name": tool, "arguments": args, "requestState": state["rs"],
                                                    "inputResponses": answers}, {"elicitation": {}})
            steps.append(post(world, modern_headers(world, msg), to_bytes(msg, random.Random(0)), expect_status={200}, note="cleanup MRTR retry (cancel)"))
        for eid in sorted(seen_ids):
            msg = modern_call(world, "tasks/cancel", {"taskId": eid}, EXT)
            steps.append(post(world, modern_headers(world, msg), to_bytes(msg, random.Random(0)), expect_status={200}, note="cleanup tasks/cancel"))
        return steps

    def followups(frng):
        eid, keys = state["eid"], state["keys"]
        steps = []
        for _ in range(frng.choice([1, 2, 3])):
            door = frng.choice(["mrtr", "update", "get", "legacy-answer", "compat", "result-stream"])
            answers = input_responses(frng, keys)
            if door == "mrtr":
                rs = state["rs"] if frng.random() < 0.85 else mutate_tree(frng, state["rs"] or eid)
                msg = modern_call(world, "tools/call", {"name": tool, "arguments": args, "requestState": rs,
                                                        "inputResponses": answers}, {"elicitation": {}})
                tame(msg)
                steps.append(post(world, modern_headers(world, msg), to_bytes(msg, frng), note="MRTR retry"))
            elif door == "update":
                msg = modern_call(world, "tasks/update", {"taskId": eid, "inputResponses": answers}, EXT)
                steps.append(post(world, modern_headers(world, msg), to_bytes(msg, frng), note="tasks/update"))
            elif door == "get":
                msg = modern_call(world, "tasks/get", {"taskId": eid}, EXT)
                steps.append(post(world, modern_headers(world, msg), to_bytes(msg, frng), note="tasks/get"))
            elif door == "legacy-answer":
                key = frng.choice(keys) if keys else "k"
                rid = "baton-input." + eid + "." + base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")
                one = answers.get(key) if isinstance(answers, dict) else answers
                body = ({"jsonrpc": "2.0", "id": rid, "result": one} if frng.random() < 0.85 else
                        {"jsonrpc": "2.0", "id": rid, "error": mutate_tree(frng, {"code": -32000, "message": "no"})})
                steps.append(post(world, legacy_headers(world, "tasks"), to_bytes(body, frng), note="legacy client response"))
            elif door == "compat":
                key = frng.choice(keys) if keys else "k"
                one = answers.get(key) if isinstance(answers, dict) else answers
                a = {"execution_id": eid, "request_key": key, "response": one}
                if frng.random() < 0.3:
                    a = mutate_tree(frng, a)
                msg = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "Baton_ProvideToolExecutionInput", "arguments": a}}
                steps.append(post(world, legacy_headers(world, "plain"), to_bytes(msg, frng), note="Baton_ProvideToolExecutionInput"))
            else:
                msg = {"jsonrpc": "2.0", "id": 9, "method": "tasks/result", "params": {"taskId": eid}}
                steps.append(post(world, legacy_headers(world, "tasks"), to_bytes(msg, frng), first_event=True, note="tasks/result (first event)"))
        return steps

    def after_get(world, resp):
        # Legacy: poll (2026-07-28 tasks/get) until the input requests are open.
        try:
            res = json.loads(resp.body)["result"]
        except (ValueError, KeyError, TypeError):
            return []
        keys = list((res.get("inputRequests") or {}).keys()) if isinstance(res, dict) else []
        if keys:
            state["keys"] = keys
            return followups(random.Random(fseed))
        state["polls"] += 1
        if state["polls"] > 30 or res.get("status") in ("completed", "failed", "cancelled"):
            return []
        time.sleep(0.05)
        msg = modern_call(world, "tasks/get", {"taskId": state["eid"]}, EXT)
        step = post(world, modern_headers(world, msg), to_bytes(msg, random.Random(0)), note="poll tasks/get")
        step.then = after_get
        return [step]

    def after_call(world, resp):
        try:
            res = json.loads(resp.body)["result"]
        except (ValueError, KeyError, TypeError):
            return []
        if era == "modern":
            if res.get("resultType") != "input_required":
                return []
            # The sealed requestState names the execution; the other doors get
            # it as a task id they cannot know (answered like an unknown one).
            state["rs"] = res.get("requestState")
            state["eid"] = state["rs"]
            state["keys"] = list((res.get("inputRequests") or {}).keys())
            if not isinstance(state["rs"], str):
                return []
            return followups(random.Random(fseed))
        task = res.get("task") or {}
        if not isinstance(task.get("taskId"), str):
            return []
        state["eid"] = task["taskId"]
        world.remember([state["eid"]])
        msg = modern_call(world, "tasks/get", {"taskId": state["eid"]}, EXT)
        step = post(world, modern_headers(world, msg), to_bytes(msg, random.Random(0)), note="poll tasks/get")
        step.then = after_get
        return [step]

    if era == "modern":
        # Without elicitation (compatibility handle) or with the tasks extension
        # (a task) the call waits out the 10 s foreground budget: keep those rare.
        caps = rng.choice([{"elicitation": {}}] * 38 + [{}, {"elicitation": {}, "extensions": {TASKS_EXT: {}}}])
        msg = modern_call(world, "tools/call", {"name": tool, "arguments": args}, caps)
        first = post(world, modern_headers(world, msg), to_bytes(msg, rng), note=f"{tool} caps={sorted(caps)}")
    else:
        msg = {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": tool, "arguments": args, "task": {}}}
        first = post(world, legacy_headers(world, "tasks"), to_bytes(msg, rng), note=f"{tool} as a legacy task")
    first.then = after_call
    return f"input-flow-{era}", [first], cleanup


GENERATORS = [
    (gen_legacy_valid, 8), (gen_modern_valid, 8), (gen_legacy_mutate, 19), (gen_modern_mutate, 19),
    (gen_headers, 13), (gen_auth, 5), (gen_raw, 8), (gen_batch, 3), (gen_deep, 4), (gen_huge, 3),
    (gen_http, 5), (gen_session_flow, 5), (gen_input_flow, 5),
]


# --------------------------------------------------------------------------
# Judging answers.


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.cases = 0
        self.passed = 0
        self.failed = 0
        self.requests = 0
        self.status = collections.Counter()
        self.codes = collections.Counter()
        self.codes_by_status = collections.Counter()
        self.categories = collections.Counter()
        self.category_failed = collections.Counter()
        self.reasons = collections.Counter()
        self.fivexx = 0
        self.no_answer = 0
        self.observations = collections.Counter()
        self.observation_examples = {}
        self.failures = []  # (case index, category, reason, Step, Response)
        self.slowest = []  # (elapsed, case index, category, note)


def carries_data(block):
    """Whether an SSE event block has non-empty data (a priming event has none)."""
    return any(line.startswith(b"data:") and line[5:].strip() for line in block.split(b"\n"))


def sse_messages(body):
    """The data of each SSE event; events with empty data (priming events, which
    only carry an id to resume from) are no message."""
    out = []
    data = []
    for line in body.decode("utf-8", "replace").split("\n"):
        line = line.rstrip("\r")
        if line == "":
            if data and "\n".join(data) != "":
                out.append("\n".join(data))
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" ") if line[5:6] == " " else line[5:])
    if data and "\n".join(data) != "":
        out.append("\n".join(data))
    return out


def judge(step, resp, allowed, world):
    """(list of failure reasons, list of outcome labels, list of observations)"""
    reasons, outcomes, notes = [], [], []
    if resp.status is None:
        reasons.append(f"no answer: {resp.error}")
        return reasons, ["no-answer"], notes
    if resp.error:
        reasons.append(f"broken answer (status {resp.status}): {resp.error}")
    if resp.status >= 500:
        reasons.append(f"HTTP {resp.status}")
    if step.expect_status and resp.status not in step.expect_status:
        reasons.append(f"expected HTTP {sorted(step.expect_status)}, got {resp.status}")
    ctype = (resp.header("content-type") or "").lower()
    messages = []
    if step.method == "HEAD":
        outcomes.append("head")  # a HEAD answer has no body to read
    elif ctype.startswith("application/json"):
        try:
            messages.append(json.loads(resp.body.decode("utf-8")))
        except (ValueError, UnicodeDecodeError) as e:
            reasons.append(f"JSON body does not parse: {e}")
    elif ctype.startswith("text/event-stream"):
        for data in sse_messages(resp.body):
            try:
                messages.append(json.loads(data))
            except ValueError as e:
                reasons.append(f"SSE data does not parse: {e}")
        if not messages and not resp.error:
            reasons.append("SSE stream ended without a message")
    elif resp.body:
        notes.append(f"non-JSON body on HTTP {resp.status} ({ctype or 'no content-type'})")
        outcomes.append("non-json")
    else:
        outcomes.append("empty")
    top_code = None
    req_id = _request_id(step) if messages else None
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            reasons.append("answer is not a JSON object")
            continue
        if "jsonrpc" not in m:
            err = m.get("error")
            if isinstance(err, dict) and isinstance(err.get("code"), str):
                outcomes.append(f"transport:{err['code']}")
                notes.append(f"non-JSON-RPC error body on HTTP {resp.status} ({err['code']})")
            else:
                reasons.append(f"answer is neither JSON-RPC nor a transport error: {str(m)[:120]}")
            continue
        if m.get("jsonrpc") != "2.0":
            reasons.append(f"jsonrpc is {m.get('jsonrpc')!r}")
        if req_id is not None and ("result" in m or "error" in m) and m.get("id") is not None and m.get("id") != req_id[0]:
            notes.append("answer id differs from the request id (ids beyond 64 bits, or non-integral numbers)")
        if "error" in m:
            e = m["error"]
            code = e.get("code") if isinstance(e, dict) else None
            if not isinstance(code, int) or isinstance(code, bool):
                reasons.append(f"error code is not an integer: {e!r:.120}")
                outcomes.append("bad-code")
            else:
                outcomes.append(str(code))
                if i == 0:
                    top_code = code
                if code not in allowed:
                    reasons.append(f"non-standard JSON-RPC error code {code}: {e.get('message')!r:.120}")
                if code == -32603:
                    data = e.get("data") if isinstance(e.get("data"), dict) else {}
                    notes.append(f"-32603 on HTTP {resp.status}: {str(e.get('message'))[:60]!r} data.code={data.get('code')!r}")
            if isinstance(e, dict) and not isinstance(e.get("message"), str):
                reasons.append("error message is not a string")
        elif "result" in m:
            outcomes.append("result")
            res = m["result"]
            # Inline errors of 2026-07-28 tasks/get (and anything shaped like it).
            if isinstance(res, dict) and isinstance(res.get("error"), dict) and "code" in res["error"]:
                c = res["error"]["code"]
                if not isinstance(c, int) or c not in allowed:
                    reasons.append(f"inline task error with code {c!r}")
            found = ID_RE.findall(json.dumps(res).encode())
            if found:
                world.remember([f.decode() for f in found[:4]])
        elif "method" in m:
            outcomes.append("server-request:" + str(m.get("method"))[:40])
        else:
            reasons.append(f"JSON-RPC message with neither result nor error: {str(m)[:120]}")
    if step.expect_code is not None:
        if top_code not in step.expect_code:
            reasons.append(f"expected JSON-RPC error {sorted(step.expect_code)}, got {top_code if top_code is not None else 'no error'}")
    return reasons, outcomes, notes


def _request_id(step):
    """(id,) of a single JSON-RPC request with a string or number id, else None."""
    if step.method != "POST" or len(step.body) > 65536:
        return None
    try:
        m = json.loads(step.body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(m, dict) or "method" not in m:
        return None
    i = m.get("id")
    if isinstance(i, bool) or not isinstance(i, (int, float, str)):
        return None
    return (i,)


# --------------------------------------------------------------------------
# Server watch: the process and its log.


class Watch:
    def __init__(self, pid, log_path):
        self.pid = pid
        self.log_path = log_path
        self.offset = 0
        self.panics = []
        self.dead = False
        self.error_lines = 0
        self.lock = threading.Lock()
        if log_path and os.path.exists(log_path):
            self.offset = os.path.getsize(log_path)

    def alive(self):
        if not self.pid:
            return True
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            return state not in ("Z", "X")
        except (FileNotFoundError, IndexError):
            try:
                os.kill(self.pid, 0)
                return True
            except OSError:
                return False

    def poll(self):
        with self.lock:
            if self.pid and not self.alive():
                self.dead = True
            if not self.log_path or not os.path.exists(self.log_path):
                return
            with open(self.log_path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
            # Only whole lines.
            cut = chunk.rfind(b"\n")
            if cut < 0:
                return
            chunk = chunk[:cut + 1]
            self.offset += len(chunk)
            for line in chunk.split(b"\n"):
                if b"panicked" in line:
                    self.panics.append(line.decode("utf-8", "replace")[:400])
                if b" ERROR " in line:
                    self.error_lines += 1


# --------------------------------------------------------------------------
# Setup.


def setup(world):
    c = Conn(world.host, world.port)

    def init(token, caps, version):
        body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": caps, "clientInfo": {"name": "mcp-fuzz", "version": "1"}}}).encode()
        r = c.request("POST", world.path, base_headers(world, token=token), body)
        sid = r.header("mcp-session-id")
        if r.status != 200 or not sid:
            raise SystemExit(f"mcp-fuzz: setup initialize failed: {r.status} {r.body[:300]!r} {r.error}")
        return sid

    world.sessions["tasks"] = init(world.token, {"tasks": {}, "elicitation": {}}, LEGACY)
    world.sessions["plain"] = init(world.token, {}, LEGACY)
    world.sessions["old"] = init(world.token, {"elicitation": {}}, LEGACY_OLD)
    world.sessions["other"] = init(world.other_token, {"tasks": {}}, LEGACY)
    world.sessions["dead"] = init(world.token, {"tasks": {}}, LEGACY)
    r = c.request("DELETE", world.path, legacy_headers(world, "dead"))
    if r.status != 204:
        raise SystemExit(f"mcp-fuzz: setup DELETE failed: {r.status} {r.body[:300]!r}")

    def task(session, token, seconds):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "Demo.Sleep", "arguments": {"seconds": seconds}, "task": {"ttl": 600000}}}).encode()
        r = c.request("POST", world.path, legacy_headers(world, session, token=token), body)
        try:
            return json.loads(r.body)["result"]["task"]["taskId"]
        except (ValueError, KeyError, TypeError):
            raise SystemExit(f"mcp-fuzz: setup task failed: {r.status} {r.body[:300]!r}")

    world.seed_task_ids = [task("tasks", world.token, s) for s in (0, 0.1, 0.5)]
    world.other_task_ids = [task("other", world.other_token, 0)]
    world.remember(world.seed_task_ids)
    c.close()


def check_alive(world):
    """The server still answers a valid request in both eras."""
    c = Conn(world.host, world.port)
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {META_VERSION: MODERN, META_CAPS: {}}}}
    a = c.request("POST", world.path, modern_headers(world, msg), json.dumps(msg).encode())
    b = c.request("POST", world.path, legacy_headers(world, "tasks"), b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
    c.close()
    ok = a.status == 200 and b.status == 200 and b'"result"' in a.body and b'"result"' in b.body
    return ok, f"modern tools/list {a.status} {a.error or ''}; legacy ping {b.status} {b.error or ''}"


# --------------------------------------------------------------------------
# Running.


def pick_generator(rng):
    total = sum(w for _, w in GENERATORS)
    x = rng.random() * total
    for g, w in GENERATORS:
        x -= w
        if x < 0:
            return g
    return GENERATORS[-1][0]


IN_FLIGHT = {}  # case index -> (category, start), for the stall report


def run_case(world, conn, index, seed, stats, allowed, watch):
    rng = random.Random(f"{seed}:{index}")
    gen = pick_generator(rng)
    category, steps, *rest = gen(world, rng)
    finally_fn = rest[0] if rest else None
    seen_ids = set()
    case_reasons = []
    queue = list(steps)
    n = 0
    t0 = time.monotonic()
    slow_note, slow_t = "", -1.0
    IN_FLIGHT[index] = (category, t0)
    while queue:
        step = queue.pop(0)
        resp = conn.request(step.method, step.target, step.headers, step.body, step.chunked, step.first_event)
        n += 1
        if finally_fn is not None:
            seen_ids.update(i.decode() for i in ID_RE.findall(resp.body[:200000]))
        if resp.elapsed > slow_t:
            slow_note, slow_t = f"{step.note[:50]} {resp.elapsed:.1f}s", resp.elapsed
        reasons, outcomes, notes = judge(step, resp, allowed, world)
        with stats.lock:
            stats.requests += 1
            stats.status[resp.status if resp.status is not None else "none"] += 1
            for o in outcomes or ["?"]:
                stats.codes[o] += 1
                stats.codes_by_status[(resp.status, o)] += 1
            if resp.status is not None and resp.status >= 500:
                stats.fivexx += 1
            if resp.status is None:
                stats.no_answer += 1
            for note in notes:
                stats.observations[note] += 1
                stats.observation_examples.setdefault(note, (index, category, step))
        if reasons:
            case_reasons.extend(reasons)
            with stats.lock:
                for r in reasons:
                    stats.reasons[re.sub(r"\d{3,}", "N", r.split(":")[0])[:80]] += 1
                if len(stats.failures) < 400:
                    stats.failures.append((index, category, reasons, step, resp))
            if resp.status is None:
                watch.poll()
        if step.then is not None and resp.status == 200:
            queue.extend(step.then(world, resp))
        if not queue and finally_fn is not None:
            queue.extend(finally_fn(world, seen_ids))
            finally_fn = None
    elapsed = time.monotonic() - t0
    IN_FLIGHT.pop(index, None)
    with stats.lock:
        stats.cases += 1
        stats.categories[category] += 1
        if case_reasons:
            stats.failed += 1
            stats.category_failed[category] += 1
        else:
            stats.passed += 1
        stats.slowest.append((elapsed, index, category, slow_note))
        if len(stats.slowest) > 50:
            stats.slowest.sort(reverse=True)
            del stats.slowest[10:]


def show_request(step, world, limit=600):
    lines = [f"    {step.method} {step.target.decode('latin-1')[:200]}" + ("  (chunked)" if step.chunked else "")]
    secrets = world.placeholders()
    for k, v in step.headers:
        text = v.decode("latin-1")
        for secret, ph in secrets:
            text = text.replace(secret, ph)
        if len(text) > 200:
            text = text[:200] + f"... ({len(v)} bytes)"
        lines.append(f"    {k.decode()}: {text!r}"[:260] if any(b > 0x7e or b < 0x20 for b in v) else f"    {k.decode()}: {text}")
    body = step.body
    shown = body[:limit]
    text = shown.decode("utf-8", "backslashreplace")
    for secret, ph in secrets:
        text = text.replace(secret, ph)
    lines.append(f"    body ({len(body)} bytes): {text}" + (" ..." if len(body) > limit else ""))
    return "\n".join(lines)


def save_failure(out_dir, world, index, category, reasons, step, resp):
    os.makedirs(out_dir, exist_ok=True)
    secrets = world.placeholders()

    def scrub(b):
        for secret, ph in secrets:
            b = b.replace(secret.encode(), ph.encode())
        return b

    doc = {
        "case": index, "category": category, "reasons": reasons, "note": step.note,
        "method": step.method, "target_b64": base64.b64encode(scrub(step.target)).decode(),
        "headers_b64": [[base64.b64encode(k).decode(), base64.b64encode(scrub(v)).decode()] for k, v in step.headers],
        "body_b64": base64.b64encode(scrub(step.body)).decode(), "chunked": step.chunked,
        "response": {"status": resp.status, "error": resp.error, "headers": resp.headers,
                     "body": resp.body[:4000].decode("utf-8", "replace")},
    }
    path = os.path.join(out_dir, f"case-{index}.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return path


def replay(world, path):
    doc = json.load(open(path))
    subs = world.placeholders()

    def fill(b):
        for secret, ph in subs:
            b = b.replace(ph.encode(), secret.encode())
        return b

    headers = [(base64.b64decode(k), fill(base64.b64decode(v))) for k, v in doc["headers_b64"]]
    step = Step(doc["method"], fill(base64.b64decode(doc["target_b64"])), headers, fill(base64.b64decode(doc["body_b64"])), chunked=doc["chunked"])
    print(show_request(step, world))
    c = Conn(world.host, world.port)
    r = c.request(step.method, step.target, step.headers, step.body, step.chunked)
    print(f"  -> HTTP {r.status} {r.error or ''}")
    for k, v in r.headers:
        print(f"     {k}: {v}")
    print("     " + r.body[:2000].decode("utf-8", "replace"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dev-json", required=True)
    ap.add_argument("--pid", type=int, default=0, help="the baton dev process to watch")
    ap.add_argument("--log", default="", help="the baton dev log to grep for panics")
    ap.add_argument("--cases", type=int, default=int(os.environ.get("MCP_FUZZ_CASES", "3000")))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("MCP_FUZZ_SEED", "20261130")))
    ap.add_argument("--threads", type=int, default=int(os.environ.get("MCP_FUZZ_THREADS", "8")))
    ap.add_argument("--body-limit", type=int, default=DEFAULT_BODY_LIMIT)
    ap.add_argument("--allowed-codes", default="-32700,-32600,-32601,-32602,-32603")
    ap.add_argument("--out", default="", help="directory for failing requests (JSON, credentials scrubbed)")
    ap.add_argument("--replay", default="", help="send one saved failing request again and print the answer")
    ap.add_argument("--show", type=int, default=15, help="failing requests printed in full")
    ap.add_argument("--only", default="", help="run only these case indexes (comma-separated), e.g. to reproduce one")
    args = ap.parse_args()

    dev = json.load(open(args.dev_json))
    world = World(dev, args.body_limit)
    allowed = {int(x) for x in args.allowed_codes.replace(" ", ",").split(",") if x.strip()}
    setup(world)
    if args.replay:
        replay(world, args.replay)
        return 0

    indexes = [int(x) for x in args.only.split(",") if x.strip()] or range(args.cases)
    if args.only:
        args.cases = len(indexes)
    print(f"mcp-fuzz: seed {args.seed}, {args.cases} cases, {args.threads} threads, target {dev['mcp_url']}")
    print(f"mcp-fuzz: allowed JSON-RPC error codes {sorted(allowed)}; body limit {args.body_limit} bytes")
    stats = Stats()
    watch = Watch(args.pid, args.log)
    counter = iter(indexes)
    counter_lock = threading.Lock()
    stop = threading.Event()

    def worker():
        conn = Conn(world.host, world.port)
        while not stop.is_set():
            with counter_lock:
                index = next(counter, None)
            if index is None:
                break
            try:
                run_case(world, conn, index, args.seed, stats, allowed, watch)
            except Exception as e:  # a fuzzer bug must not pass silently
                with stats.lock:
                    stats.cases += 1
                    stats.failed += 1
                    stats.reasons[f"fuzzer error {type(e).__name__}"] += 1
                print(f"mcp-fuzz: case {index}: fuzzer error {type(e).__name__}: {e}", file=sys.stderr)
                traceback.print_exc()
                conn.close()
        conn.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.threads)]
    for t in threads:
        t.start()
    last = t0
    while any(t.is_alive() for t in threads):
        time.sleep(0.25)
        watch.poll()
        if watch.dead:
            print("mcp-fuzz: the server process died; stopping", file=sys.stderr)
            stop.set()
            break
        now = time.monotonic()
        if now - last >= 15:
            last = now
            with stats.lock:
                print(f"mcp-fuzz: ... {stats.cases}/{args.cases} cases, {stats.failed} failed, {now - t0:.0f} s", flush=True)
            stuck = [(i, c, now - st) for i, (c, st) in list(IN_FLIGHT.items()) if now - st > 30]
            if stuck:
                print("mcp-fuzz:     running for over 30 s: " + ", ".join(f"#{i} {c} ({a:.0f} s)" for i, c, a in sorted(stuck)), flush=True)
    for t in threads:
        t.join(timeout=REQUEST_TIMEOUT + 5)
    elapsed = time.monotonic() - t0
    time.sleep(0.5)
    watch.poll()

    alive_ok, alive_detail = (False, "the process is gone") if watch.dead else check_alive(world)
    watch.poll()

    s = stats
    print()
    print(f"cases run        {s.cases} ({s.requests} HTTP requests) in {elapsed:.1f} s, {s.cases / max(elapsed, 1e-9):.0f} cases/s")
    print(f"seed             {args.seed}  (MCP_FUZZ_SEED={args.seed} MCP_FUZZ_CASES={args.cases} to run it again)")
    print(f"HTTP 5xx         {s.fivexx}")
    print(f"no answer        {s.no_answer}")
    print(f"panics           {len(watch.panics)}")
    print(f"server alive     {'yes' if (alive_ok and not watch.dead) else 'NO'} ({alive_detail})")
    print(f"log ERROR lines  {watch.error_lines}")
    print("by category      " + ", ".join(f"{k} {v}" + (f" ({s.category_failed[k]} failed)" if s.category_failed[k] else "")
                                      for k, v in sorted(s.categories.items())))
    print("HTTP status      " + ", ".join(f"{k}: {v}" for k, v in sorted(s.status.items(), key=lambda kv: str(kv[0]))))
    print("JSON-RPC outcome " + ", ".join(f"{k}: {v}" for k, v in sorted(s.codes.items(), key=lambda kv: kv[0])))
    print("  by status      " + ", ".join(f"{st}/{o}: {v}" for (st, o), v in sorted(s.codes_by_status.items(), key=lambda kv: (str(kv[0][0]), kv[0][1]))))
    s.slowest.sort(reverse=True)
    print("slowest cases    " + ", ".join(f"#{i} {c} {e:.1f}s [{n}]" for e, i, c, n in s.slowest[:5]))
    if s.observations:
        print("observations (not failures):")
        for note, n in s.observations.most_common():
            idx, cat, _ = s.observation_examples[note]
            print(f"  {n:6d}  {note}  (e.g. case #{idx}, {cat})")
    for p in watch.panics[:10]:
        print(f"PANIC: {p}")
    failed = s.failed
    if watch.panics:
        failed += len(watch.panics)
    if watch.dead or not alive_ok:
        failed += 1
    if s.reasons:
        print("failure reasons:")
        for r, n in s.reasons.most_common():
            print(f"  {n:6d}  {r}")
    if s.failures:
        shown = 0
        seen = set()
        print(f"failing requests (first {args.show} distinct reasons; all saved under {args.out or '(no --out)'}):")
        for index, category, reasons, step, resp in sorted(s.failures, key=lambda f: f[0]):
            if args.out:
                save_failure(args.out, world, index, category, reasons, step, resp)
            key = re.sub(r"\d+", "N", reasons[0].split(":")[0]) + category.split("-")[0]
            if key in seen or shown >= args.show:
                continue
            seen.add(key)
            shown += 1
            print(f"  case #{index} ({category}, {step.note[:80]}): {'; '.join(reasons)[:300]}")
            print(show_request(step, world))
            print(f"    -> HTTP {resp.status} {resp.error or ''} {resp.body[:300].decode('utf-8', 'replace')}")
    passed = s.passed
    print(f"mcp-fuzz: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""python `mcp==1.30.0` against a real `baton dev` whose caller is over its admission
bound: a call is refused with JSON-RPC -32025 on HTTP 200 (with `Retry-After`),
`data` naming the scope and `retryAfterMs`; the SDK raises it as an McpError and the
session goes on. At HTTP 429 this SDK's transport raised `httpx.HTTPStatusError`
inside its task group and ended the whole session, which is why Baton does not
answer MCP capacity pressure with 429.

Fills the other dev user's bound (so the suites' own user keeps its room) and runs
alone, after the other suites: the long executions it starts hold worker slots.

usage: python_mcp_saturation.py DEV_JSON
"""

import sys
import warnings

import anyio

warnings.simplefilter("ignore", DeprecationWarning)

from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402
from mcp.shared.exceptions import McpError  # noqa: E402

from cases import Cases, check, load_dev, release, saturate  # noqa: E402

SUITE = "python mcp 1.30.0 (over capacity)"


async def main(dev):
    cases = Cases(SUITE)
    ids = saturate(dev)
    try:
        headers = {"Authorization": f"Bearer {dev['credentials']['other_end_user']['token']}"}
        async with (
            create_mcp_http_client(headers=headers) as http,
            streamable_http_client(dev["mcp_url"], http_client=http) as (read, write, _),
            ClientSession(read, write) as s,
        ):
            await s.initialize()

            async def refused(call):
                try:
                    with anyio.fail_after(30):
                        await call()
                except McpError as e:
                    check(e.error.code == -32025, f"over capacity gave {e.error.code}: {e.error.message}")
                    data = e.error.data or {}
                    check(data.get("code") == "capacity_exceeded", f"data {data}")
                    check(data.get("scope") == "principal", f"data {data}")
                    check(isinstance(data.get("retryAfterMs"), int) and data["retryAfterMs"] > 0, f"data {data}")
                else:
                    raise AssertionError("a call over the admission bound must fail")
                with anyio.fail_after(30):
                    tools = await s.list_tools()
                check(any(t.name == "Demo.Echo" for t in tools.tools), "the session goes on after the refusal")

            await cases.run(
                "tools/call over the bound is -32025 with scope and retryAfterMs; the session goes on",
                refused,
                lambda: s.call_tool("Demo.Sleep", {"seconds": 1}),
            )
            await cases.run(
                "a task call over the bound is -32025 too",
                refused,
                lambda: s.experimental.call_tool_as_task("Demo.Sleep", {"seconds": 1}, ttl=60_000),
            )
    finally:
        release(dev, ids)
    return cases


cases = anyio.run(main, load_dev(sys.argv[1]))
cases.exit()

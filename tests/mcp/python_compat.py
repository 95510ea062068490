"""The compatibility surface for MCP clients that do not use Tasks, with python
`mcp==1.30.0` calling tools the plain way: a tool that outlives the foreground budget
answers with the execution handle, `Baton_GetToolExecution` with `wait_ms` returns the
completed result, and the execution is the same one REST shows the same user (and no
one else).

usage: python_compat.py DEV_JSON
"""

import sys

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from cases import Cases, check, load_dev, rest

SUITE = "compatibility handle (python mcp 1.30.0, no tasks)"
PREFIX = "Baton"
# Past the gateway's foreground budget (10 s in `baton dev`).
BEYOND_BUDGET = 12


def handle_of(result):
    h = result.structuredContent
    check(not result.isError, f"isError in {result}")
    check(isinstance(h, dict) and h.get("type") == "baton.execution/v1", f"structuredContent {h}")
    check(h["execution_id"].startswith("te_"), f"execution id {h['execution_id']}")
    return h


async def main(dev):
    cases = Cases(SUITE)
    user = dev["credentials"]["end_user"]["token"]
    other = dev["credentials"]["other_end_user"]["token"]
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {user}"}) as http,
        streamable_http_client(dev["mcp_url"], http_client=http) as (read, write, _),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        state = {}

        async def tools_listed():
            names = {t.name for t in (await s.list_tools()).tools}
            wanted = {f"{PREFIX}_{n}" for n in ("ListToolExecutions", "GetToolExecution",
                                                "ProvideToolExecutionInput", "CancelToolExecution")}
            check(wanted <= names, f"missing {wanted - names}")

        async def long_calls():
            # Two long calls at once: both wait out the same foreground budget.
            async def call(key, seconds):
                state[key] = await s.call_tool("Demo.Sleep", {"seconds": seconds})

            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "long", BEYOND_BUDGET)
                tg.start_soon(call, "to_cancel", 300)
            for key in ("long", "to_cancel"):
                h = handle_of(state[key])
                check(h["state"] in ("pending", "working"), f"handle state {h['state']}")
                action = h["next_action"]
                check(action["tool"] == f"{PREFIX}_GetToolExecution", f"next_action {action}")
                check(action["arguments"]["execution_id"] == h["execution_id"], f"next_action {action}")
                text = state[key].content[0].text
                check("http" not in text and "http" not in str(h), f"the handle exposes a URL: {text} {h}")
                state[key] = h

        async def wait_for_result():
            h = state["long"]
            action = h["next_action"]
            for _ in range(10):
                got = await s.call_tool(action["tool"], action["arguments"])
                check(not got.isError, f"{action['tool']} answered {got}")
                view = got.structuredContent
                if view["state"] == "completed":
                    break
                check(view["state"] in ("pending", "working"), f"state {view['state']}")
            check(view["state"] == "completed", f"never completed: {view}")
            check(view["result"]["content"][0]["text"] == f"slept {BEYOND_BUDGET} s", f"result {view['result']}")
            check(any(c.type == "text" and c.text == f"slept {BEYOND_BUDGET} s" for c in got.content), f"{got.content}")

        async def visible_over_rest():
            eid = state["long"]["execution_id"]
            status, body = rest(dev, "GET", f"/tool-executions/{eid}", user)
            check(status == 200 and body["status"] == "completed", f"REST view {status} {body}")
            status, body = rest(dev, "GET", f"/tool-executions/{eid}/result", user)
            check(status == 200, f"REST result {status} {body}")
            check(body["result"]["content"][0]["text"] == f"slept {BEYOND_BUDGET} s", f"REST result {body}")
            status, body = rest(dev, "GET", "/tool-executions?limit=100", user)
            check(status == 200, f"REST list {status} {body}")
            listed = {e["execution_id"] for e in body.get("executions", body.get("items", []))}
            check(eid in listed, f"{eid} not in the REST listing {listed}")
            status, _ = rest(dev, "GET", f"/tool-executions/{eid}", other)
            check(status == 404, f"another user sees the execution: {status}")

        async def listed_and_cancelled():
            eid = state["to_cancel"]["execution_id"]
            listed = await s.call_tool(f"{PREFIX}_ListToolExecutions", {"limit": 100})
            ids = {e["execution_id"] for e in listed.structuredContent["executions"]}
            check(eid in ids and state["long"]["execution_id"] in ids, f"listing {ids}")
            cancelled = await s.call_tool(f"{PREFIX}_CancelToolExecution", {"execution_id": eid})
            check(not cancelled.isError, f"cancel answered {cancelled}")
            view = None
            for _ in range(10):
                got = await s.call_tool(f"{PREFIX}_GetToolExecution", {"execution_id": eid, "wait_ms": 5000})
                view = got.structuredContent
                if view["state"] == "cancelled":
                    break
            check(view["state"] == "cancelled", f"after cancel: {view}")
            status, body = rest(dev, "GET", f"/tool-executions/{eid}", user)
            check(status == 200 and body["status"] == "cancelled", f"REST after cancel {status} {body}")

        await cases.run("the four compatibility tools are listed", tools_listed)
        await cases.run("a long tool call returns the execution handle", long_calls)
        await cases.run("Baton_GetToolExecution with wait_ms returns the completed result", wait_for_result)
        await cases.run("the MCP-started execution is visible over REST to the same user only", visible_over_rest)
        await cases.run("Baton_ListToolExecutions lists it; Baton_CancelToolExecution cancels", listed_and_cancelled)
    return cases


anyio.run(main, load_dev(sys.argv[1])).exit()

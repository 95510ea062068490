"""`fastmcp[tasks]==4.1.4` against a real `baton dev`: protocol 2026-07-28 with the
`io.modelcontextprotocol/tasks` extension (server-directed tasks, tasks/get with the
result inline, tasks/cancel as an ack).

fastmcp-tasks 4.1.4's request classes omit the `Mcp-Name: <taskId>` header the
2026-07-28 transport requires (Baton keeps that check, see mcp-tasks.md §5), so the
test sets their `name_param`, which makes the SDK send it; one case proves the
header is enforced.

usage: python_fastmcp_v2.py DEV_JSON
"""

import asyncio
import sys

from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.exceptions import ToolError
from fastmcp_tasks import call_tool_task, client_models

from cases import Cases, check, load_dev

SUITE = "fastmcp[tasks] 4.1.4 (2026-07-28 extension)"
TASK_REQUESTS = (client_models.GetTaskRequest, client_models.UpdateTaskRequest, client_models.CancelTaskRequest)
# Demo.Sleep may run in the background; past the gateway's foreground budget (10 s in
# `baton dev`) it is handed over as a task.
BEYOND_BUDGET = 11


def send_mcp_name(on):
    for cls in TASK_REQUESTS:
        cls.name_param = "taskId" if on else None


def error_code(e):
    """The JSON-RPC code of an SDK error, wherever this SDK version keeps it."""
    for attr in ("code",):
        if isinstance(getattr(e, attr, None), int):
            return getattr(e, attr)
    err = getattr(e, "error", None)
    return getattr(err, "code", None)


async def main(dev):
    cases = Cases(SUITE)
    send_mcp_name(True)
    headers = {"Authorization": f"Bearer {dev['credentials']['end_user']['token']}"}
    transport = StreamableHttpTransport(dev["mcp_url"], headers=headers)
    async with Client(transport) as c:
        state = {}

        async def discover():
            tools = {t.name for t in await c.list_tools()}
            check({"Demo.Echo", "Demo.Sleep"} <= tools, f"tools {tools}")
            check(str(c.session.protocol_version) == "2026-07-28", f"negotiated {c.session.protocol_version}")

        async def foreground():
            res = await c.call_tool("Demo.Echo", {"text": "hi"})
            check(res.content[0].text == "hi", f"content {res.content}")

        async def task_to_completion():
            t = await call_tool_task(c, "Demo.Sleep", {"seconds": BEYOND_BUDGET})
            cr = t.create_result
            check(cr.task_id.startswith("te_"), f"task id {cr.task_id}")
            check(cr.status == "working", f"created as {cr.status}")
            check(cr.ttl_ms is None or cr.ttl_ms > 0, f"ttlMs {cr.ttl_ms}")
            check(cr.poll_interval_ms and cr.poll_interval_ms > 0, f"pollIntervalMs {cr.poll_interval_ms}")
            got = await t.status()
            check(got.task_id == cr.task_id and got.status in ("working", "completed"), f"tasks/get {got}")
            res = await asyncio.wait_for(t.result(), 60)
            check(res.content[0].text == f"slept {BEYOND_BUDGET} s", f"content {res.content}")
            final = await t.status()
            check(final.status == "completed" and final.result is not None, f"final {final}")
            state["done"] = t

        async def cancel_running():
            t = await call_tool_task(c, "Demo.Sleep", {"seconds": 300})
            await t.cancel()
            final = await t.wait(timeout=30)
            check(final.status == "cancelled", f"after cancel: {final.status}")
            try:
                await t.result()
            except ToolError:
                pass
            else:
                raise AssertionError("the result of a cancelled task must raise")

        async def tool_failure():
            # fastmcp raises a tool result's isError as ToolError unless asked not to.
            res = await c.call_tool("Demo.Fail", {"retryable": False, "times": 1}, raise_on_error=False)
            check(res.is_error, f"is_error not set: {res}")
            check(res.content[0].text == "planned failure 1 of 1", f"content {res.content}")
            try:
                await c.call_tool("Demo.Fail", {"retryable": False, "times": 1})
            except ToolError as e:
                check("planned failure 1 of 1" in str(e), f"ToolError says {e}")
            else:
                raise AssertionError("fastmcp must raise a tool's failure as ToolError")

        async def cancel_terminal():
            check("done" in state, "no finished task from the earlier case")
            await state["done"].cancel()  # an empty ack, also for a terminal task
            final = await state["done"].status()
            check(final.status == "completed", f"a cancel must not change a terminal task: {final.status}")

        async def mcp_name_required():
            check("done" in state, "no finished task from the earlier case")
            send_mcp_name(False)
            try:
                await state["done"].status()
            except Exception as e:  # noqa: BLE001 - the SDK's error type varies by version
                check(error_code(e) == -32020, f"expected -32020, got {e!r}")
            else:
                raise AssertionError("tasks/get without Mcp-Name must be refused")
            finally:
                send_mcp_name(True)

        await cases.run("server/discover, tools/list", discover)
        await cases.run("a quick tool answers in the foreground", foreground)
        # Both hand-overs wait out the same foreground budget, so run them together.
        await asyncio.gather(
            cases.run("a long tool becomes a task; tasks/get polls it to the inline result", task_to_completion),
            cases.run("tasks/cancel of a running task ends it cancelled", cancel_running),
        )
        await cases.run("a tool's failure is a result with isError and its message", tool_failure)
        await cases.run("tasks/cancel of a terminal task is an ack and changes nothing", cancel_terminal)
        await cases.run("tasks/get without Mcp-Name is refused with -32020", mcp_name_required)
    return cases


asyncio.run(main(load_dev(sys.argv[1]))).exit()

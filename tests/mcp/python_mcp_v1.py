"""python `mcp==1.30.0` against a real `baton dev`: the 2025-11-25 tasks utility.

usage: python_mcp_v1.py DEV_JSON
"""

import sys
import warnings

import anyio

# mcp 1.30 marks every experimental tasks call deprecated; the warnings are noise here.
warnings.simplefilter("ignore", DeprecationWarning)

import mcp.types as types  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402
from mcp.shared.exceptions import McpError  # noqa: E402

from cases import Cases, check, load_dev  # noqa: E402

RELATED_TASK = "io.modelcontextprotocol/related-task"
SUITE = "python mcp 1.30.0 (2025-11-25 tasks)"


async def session_test(dev):
    cases = Cases(SUITE)
    headers = {"Authorization": f"Bearer {dev['credentials']['end_user']['token']}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(dev["mcp_url"], http_client=http) as (read, write, _),
        ClientSession(read, write) as s,
    ):
        state = {}

        async def initialize():
            init = await s.initialize()
            check(init.protocolVersion == "2025-11-25", f"negotiated {init.protocolVersion}")
            tasks = init.capabilities.tasks
            check(tasks is not None and tasks.requests.tools.call is not None, f"tasks capability: {tasks}")
            check(tasks.list is not None and tasks.cancel is not None, f"tasks capability: {tasks}")
            tools = {t.name: t for t in (await s.list_tools()).tools}
            check("Demo.Sleep" in tools, f"tools: {list(tools)}")
            check(tools["Demo.Sleep"].execution.taskSupport == "optional", f"{tools['Demo.Sleep'].execution}")

        async def task_poll_result():
            created = await s.experimental.call_tool_as_task("Demo.Sleep", {"seconds": 1.5}, ttl=60_000)
            tid = created.task.taskId
            check(created.task.status == "working", f"created as {created.task.status}")
            check(created.task.pollInterval and created.task.pollInterval > 0, f"pollInterval {created.task.pollInterval}")
            seen = []
            with anyio.fail_after(30):
                async for st in s.experimental.poll_task(tid):
                    seen.append(st.status)
            check(seen[-1] == "completed", f"statuses seen: {seen}")
            res = await s.experimental.get_task_result(tid, types.CallToolResult)
            check(not res.isError, f"isError in {res}")
            check(res.content[0].text == "slept 1.5 s", f"content {res.content}")
            check(res.meta[RELATED_TASK]["taskId"] == tid, f"_meta {res.meta}")
            state["done"] = tid

        async def blocking_result():
            # tasks/result on a working task blocks until the result exists.
            created = await s.experimental.call_tool_as_task("Demo.Echo", {"text": "hello"})
            with anyio.fail_after(30):
                res = await s.experimental.get_task_result(created.task.taskId, types.CallToolResult)
            check(res.content[0].text == "hello", f"content {res.content}")

        async def list_tasks():
            check("done" in state, "no finished task from the earlier case")
            tasks, cursor = [], None
            for _ in range(20):
                page = await s.experimental.list_tasks(cursor)
                tasks += page.tasks
                cursor = page.nextCursor
                if not cursor or any(t.taskId == state["done"] for t in tasks):
                    break
            mine = [t for t in tasks if t.taskId == state["done"]]
            check(len(mine) == 1 and mine[0].status == "completed", f"task {state['done']} in {tasks}")

        async def cancel_running():
            created = await s.experimental.call_tool_as_task("Demo.Sleep", {"seconds": 120})
            tid = created.task.taskId
            cancelled = await s.experimental.cancel_task(tid)
            check(cancelled.status == "cancelled", f"cancel answered {cancelled.status}")
            got = await s.experimental.get_task(tid)
            check(got.status == "cancelled", f"tasks/get after cancel: {got.status}")
            try:
                await s.experimental.get_task_result(tid, types.CallToolResult)
            except McpError:
                pass
            else:
                raise AssertionError("tasks/result of a cancelled task must be an error")
            state["cancelled"] = tid

        async def cancel_terminal():
            for key in ("done", "cancelled"):
                check(key in state, f"no {key} task from the earlier cases")
                try:
                    await s.experimental.cancel_task(state[key])
                except McpError as e:
                    check(e.error.code == -32602, f"cancel of a terminal task gave {e.error.code}")
                else:
                    raise AssertionError(f"cancel of the {key} task must fail with -32602")

        async def tool_failure_foreground():
            # The tool's own failure is a result the model reads, not an exception.
            res = await s.call_tool("Demo.Fail", {"retryable": False, "times": 1})
            check(res.isError, f"isError not set: {res}")
            check(res.content[0].text == "planned failure 1 of 1", f"content {res.content}")

        async def tool_failure_task():
            created = await s.experimental.call_tool_as_task("Demo.Fail", {"retryable": False, "times": 1})
            tid = created.task.taskId
            with anyio.fail_after(30):
                async for st in s.experimental.poll_task(tid):
                    final = st
            check(final.status == "failed", f"a tool's failure ends the 2025-11-25 task failed: {final.status}")
            res = await s.experimental.get_task_result(tid, types.CallToolResult)
            check(res.isError, f"tasks/result must be the isError result: {res}")
            check(res.content[0].text == "planned failure 1 of 1", f"content {res.content}")

        async def unknown_task():
            try:
                await s.experimental.get_task("te_000000000000000000000000000")
            except McpError as e:
                check(e.error.code == -32602, f"unknown task gave {e.error.code}")
            else:
                raise AssertionError("tasks/get of an unknown task must fail")

        await cases.run("initialize negotiates 2025-11-25 with tasks; tools carry taskSupport", initialize)
        await cases.run("tools/call as a task, poll tasks/get, tasks/result with related-task _meta", task_poll_result)
        await cases.run("tasks/result blocks until the result exists", blocking_result)
        await cases.run("tasks/list shows the finished task", list_tasks)
        await cases.run("tasks/cancel of a running task answers cancelled", cancel_running)
        await cases.run("tasks/cancel of a terminal task is -32602", cancel_terminal)
        await cases.run("tasks/get of an unknown task is -32602", unknown_task)
        await cases.run("a tool's failure in the foreground is a result with isError and its message", tool_failure_foreground)
        await cases.run("a tool's failure as a task: status failed, tasks/result the isError result", tool_failure_task)
    return cases


cases = anyio.run(session_test, load_dev(sys.argv[1]))
cases.exit()

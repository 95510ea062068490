"""A third-party remote MCP server for Baton's tests: `fastmcp[tasks]==4.1.4`,
protocol 2026-07-28 with the `io.modelcontextprotocol/tasks` extension
(in-memory task backend). Every tool runs as a task.

  ask_name {}              asks for a name (form elicitation), answers "Hello {name}"
  slow_echo {text, seconds} works `seconds`, then echoes `text`
  ask_sample {}            asks the client to sample an LLM (Baton does not support it)

GET /stats answers {"tools_call": n}: how many tools/call requests reached the server.

usage: python v2_server.py   (prints "PORT <n>" once listening on 127.0.0.1)
"""

import asyncio
import socket
from datetime import timedelta

import mcp_types
import uvicorn
from fastmcp import Context, FastMCP
from fastmcp.server.middleware import Middleware
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension
from starlette.requests import Request
from starlette.responses import JSONResponse

calls = {"tools_call": 0}
# Polled at 200 ms (fastmcp's default is 5 s): the tests wait on it.
TASK = TaskConfig(mode="required", poll_interval=timedelta(milliseconds=200))


class CountCalls(Middleware):
    async def on_call_tool(self, context, call_next):
        calls["tools_call"] += 1
        return await call_next(context)


mcp = FastMCP("py-v2-tasks", version="4.1.4")
mcp.add_extension(TasksExtension())


@mcp.custom_route("/stats", methods=["GET"])
async def stats(_: Request) -> JSONResponse:
    return JSONResponse(calls)


def ask(key, request):
    return mcp_types.InputRequiredResult(input_requests={key: request})


@mcp.tool(task=TASK)
async def ask_name(ctx: Context) -> str:
    """Asks the user for a name, then greets them."""
    answers = ctx.input_responses or {}
    if "name" not in answers:
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        params = mcp_types.ElicitRequestFormParams(message="Your name?", requested_schema=schema)
        return ask("name", mcp_types.ElicitRequest(params=params))
    answer = answers["name"]
    content = getattr(answer, "content", None) or {}
    return f"Hello {content.get('name', 'nobody')}"


@mcp.tool(task=TASK)
async def slow_echo(text: str, seconds: float = 1.0) -> str:
    """Works for `seconds`, then echoes `text`."""
    await asyncio.sleep(seconds)
    return text


@mcp.tool(task=TASK)
async def ask_sample(ctx: Context) -> str:
    """Asks the client to sample an LLM."""
    answers = ctx.input_responses or {}
    if "sample" not in answers:
        message = mcp_types.SamplingMessage(role="user", content=mcp_types.TextContent(type="text", text="Summarize"))
        params = mcp_types.CreateMessageRequestParams(messages=[message], max_tokens=50)
        return ask("sample", mcp_types.CreateMessageRequest(params=params))
    return "sampled"


mcp.add_middleware(CountCalls())


def main():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = mcp.http_app(path="/mcp")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    print(f"PORT {port}", flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()

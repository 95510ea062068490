"""A third-party remote MCP server for Baton's tests: python `mcp==1.30.0`
(low-level server), protocol 2025-11-25 with the experimental tasks utility.
Tasks are bound to the MCP session that created them (the SDK's default).
Every tool requires a task.

  ask_name {}              asks for a name (form elicitation on tasks/result), answers "Hello {name}"
  slow_echo {text, seconds} works `seconds`, then echoes `text`
  ask_sample {}            asks the client to sample an LLM although it declared no
                           sampling capability (Baton supports none)

GET /stats answers {"tools_call": n, "traceparent_header": …, "traceparent_meta": …}: how
many tools/call requests reached the server, and the W3C trace context the last one
carried in its HTTP headers and in `params._meta`.

usage: python v1_server.py   (prints "PORT <n>" once bound on 127.0.0.1; endpoint /mcp/)
"""

import contextlib
import socket

import anyio
import mcp.types as types
import uvicorn
from mcp.server.experimental.task_context import ServerTaskContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

server = Server("py-v1-tasks", version="1.30.0")
server.experimental.enable_tasks()
calls = {"tools_call": 0}
POLL_MS = 200
TASK_REQUIRED = types.ToolExecution(taskSupport="required")


@server.list_tools()
async def list_tools():
    empty = {"type": "object", "properties": {}}
    echo = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "seconds": {"type": "number"}},
        "required": ["text"],
    }
    return [
        types.Tool(name="ask_name", description="Asks for a name.", inputSchema=empty, execution=TASK_REQUIRED),
        types.Tool(name="slow_echo", description="Works, then echoes.", inputSchema=echo, execution=TASK_REQUIRED),
        types.Tool(name="ask_sample", description="Asks for sampling.", inputSchema=empty, execution=TASK_REQUIRED),
    ]


def text(t):
    return types.CallToolResult(content=[types.TextContent(type="text", text=t)])


@server.call_tool()
async def call_tool(name, args):
    calls["tools_call"] += 1
    ctx = server.request_context
    request = getattr(ctx, "request", None)
    calls["traceparent_header"] = request.headers.get("traceparent") if request is not None else None
    meta = ctx.meta.model_dump() if ctx.meta is not None else {}
    calls["traceparent_meta"] = meta.get("traceparent")

    async def work(task: ServerTaskContext):
        if name == "ask_name":
            schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
            r = await task.elicit(message="Your name?", requestedSchema=schema)
            who = (r.content or {}).get("name") if r.action == "accept" else None
            return text(f"Hello {who or 'nobody'}")
        if name == "slow_echo":
            seconds = float(args.get("seconds", 1))
            await task.update_status(f"working for {seconds} s")
            await anyio.sleep(seconds)
            return text(args["text"])
        if name == "ask_sample":
            # A server that asks regardless of the client's capabilities.
            task._check_sampling_capability = lambda: None
            message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="Summarize"))
            await task.create_message(messages=[message], max_tokens=50)
            return text("sampled")
        raise ValueError(f"unknown tool {name}")

    return await ctx.experimental.run_task(work, model_immediate_response=None)


async def stats(_: Request) -> JSONResponse:
    return JSONResponse(calls)


manager = StreamableHTTPSessionManager(app=server)


@contextlib.asynccontextmanager
async def lifespan(_app):
    async with manager.run():
        yield


def main():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = Starlette(routes=[Route("/stats", stats), Mount("/mcp", app=manager.handle_request)], lifespan=lifespan)
    server_ = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    print(f"PORT {port}", flush=True)
    server_.run(sockets=[sock])


if __name__ == "__main__":
    main()

// `@modelcontextprotocol/sdk@1.32.2` against a real `baton dev`: the 2025-11-25 tasks
// utility through `client.experimental.tasks.callToolStream`, and resuming a
// `tasks/result` stream with the transport's resumption token.
// usage: node ts_sdk_v1.mjs DEV_JSON   (run from a directory whose node_modules has the SDK)
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js";

const SUITE = "@modelcontextprotocol/sdk 1.32.2 (2025-11-25 tasks)";
const RELATED_TASK = "io.modelcontextprotocol/related-task";
const dev = JSON.parse(readFileSync(process.argv[2], "utf8"));
let failed = 0;

function check(cond, message) {
  if (!cond) throw new Error(message);
}

async function run(name, fn) {
  const started = Date.now();
  try {
    await fn();
    console.log(`PASS ${SUITE}: ${name} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  } catch (e) {
    failed += 1;
    console.log(`FAIL ${SUITE}: ${name}: ${e?.stack ?? e}`);
  }
}

async function collect(stream) {
  const messages = [];
  for await (const m of stream) messages.push(m);
  return messages;
}

const client = new Client({ name: "baton-ts-test", version: "1.0.0" }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(new URL(dev.mcp_url), {
  requestInit: { headers: { Authorization: `Bearer ${dev.credentials.end_user.token}` } },
});

await run("connect negotiates 2025-11-25 with the tasks capability", async () => {
  await client.connect(transport);
  check(transport.protocolVersion === "2025-11-25", `negotiated ${transport.protocolVersion}`);
  const caps = client.getServerCapabilities();
  check(caps?.tasks?.requests?.tools?.call, `capabilities ${JSON.stringify(caps)}`);
  const tools = (await client.listTools()).tools;
  const sleep = tools.find((t) => t.name === "Demo.Sleep");
  check(sleep?.execution?.taskSupport === "optional", `Demo.Sleep ${JSON.stringify(sleep)}`);
});

let finished;
await run("callToolStream with a task: taskCreated, taskStatus, result", async () => {
  const stream = client.experimental.tasks.callToolStream(
    { name: "Demo.Sleep", arguments: { seconds: 1.5 } },
    undefined,
    { task: { ttl: 60000 } },
  );
  const messages = await collect(stream);
  const types = messages.map((m) => m.type);
  check(types[0] === "taskCreated", `first message ${types[0]} (all: ${types})`);
  const taskId = messages[0].task.taskId;
  check(taskId.startsWith("te_"), `task id ${taskId}`);
  const last = messages[messages.length - 1];
  check(last.type === "result", `last message ${JSON.stringify(last)}`);
  check(last.result.content[0].text === "slept 1.5 s", `result ${JSON.stringify(last.result)}`);
  check(last.result._meta?.[RELATED_TASK]?.taskId === taskId, `_meta ${JSON.stringify(last.result._meta)}`);
  const got = await client.experimental.tasks.getTask(taskId);
  check(got.status === "completed", `getTask ${JSON.stringify(got)}`);
  finished = taskId;
});

await run("callToolStream of a failing tool ends in an error message", async () => {
  const messages = await collect(
    client.experimental.tasks.callToolStream(
      { name: "Demo.Fail", arguments: { retryable: false, times: 1 } },
      undefined,
      { task: { ttl: 60000 } },
    ),
  );
  const last = messages[messages.length - 1];
  check(messages[0].type === "taskCreated", `first ${messages[0].type}`);
  check(last.type === "error", `last message ${JSON.stringify(last)}`);
});

await run("callTool of a failing tool answers a result with isError and its message", async () => {
  const result = await client.callTool({ name: "Demo.Fail", arguments: { retryable: false, times: 1 } });
  check(result.isError === true, `isError ${JSON.stringify(result)}`);
  check(result.content[0].text === "planned failure 1 of 1", `content ${JSON.stringify(result.content)}`);
});

await run("listTasks shows the finished task; cancelTask of a running task", async () => {
  check(finished, "no finished task from the earlier case");
  const listed = (await client.experimental.tasks.listTasks()).tasks;
  check(
    listed.some((t) => t.taskId === finished && t.status === "completed"),
    `listTasks ${JSON.stringify(listed)}`,
  );
  const stream = client.experimental.tasks.callToolStream(
    { name: "Demo.Sleep", arguments: { seconds: 300 } },
    undefined,
    { task: { ttl: 60000 } },
  );
  const first = (await stream.next()).value;
  check(first?.type === "taskCreated", `first ${JSON.stringify(first)}`);
  const cancelled = await client.experimental.tasks.cancelTask(first.task.taskId);
  check(cancelled.status === "cancelled", `cancelTask ${JSON.stringify(cancelled)}`);
  const rest = await collect(stream);
  const last = rest[rest.length - 1];
  check(last?.type === "error", `after cancel the stream ends in ${JSON.stringify(last)}`);
});

await run("a tasks/result stream resumes from its Last-Event-ID through the SDK's resumption token", async () => {
  const created = await client.request(
    { method: "tools/call", params: { name: "Demo.Sleep", arguments: { seconds: 1.5 }, task: { ttl: 60000 } } },
    CreateTaskResultSchema,
  );
  const taskId = created.task.taskId;
  let token;
  const first = client.request({ method: "tasks/result", params: { taskId } }, CallToolResultSchema, {
    onresumptiontoken: (t) => {
      token = token ?? t;
    },
  });
  for (let i = 0; !token && i < 200; i++) await new Promise((r) => setTimeout(r, 25));
  check(token, "the stream carried no event id");
  // A second request resumes from that id (GET with Last-Event-ID) and is answered as the first.
  const resumed = await client.request({ method: "tasks/result", params: { taskId } }, CallToolResultSchema, {
    resumptionToken: token,
  });
  check(resumed.content?.[0]?.text === "slept 1.5 s", `resumed ${JSON.stringify(resumed)}`);
  const original = await first;
  check(original.content?.[0]?.text === "slept 1.5 s", `original ${JSON.stringify(original)}`);
});

await client.close();
process.exit(failed ? 1 : 0);

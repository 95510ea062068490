//! Remote MCP servers through a worker (issue #7), against third-party servers
//! written with the python SDKs and started here: `mcp==1.30.0` (2025-11-25
//! tasks, `tests/mcp/remote/v1_server.py`) and `fastmcp[tasks]==4.1.4`
//! (2026-07-28 extension, `v2_server.py`). Their venvs are installed once
//! under `$BATON_TOOLS_DIR` (default `~/.cache/baton-tools`) from PyPI.
//! Each server counts the `tools/call` requests it received (`GET /stats`).

use crate::harness::{Cluster, Settings, eventually};
use anyhow::{Context as _, Result, anyhow, bail};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

#[derive(Clone, Copy, Debug)]
enum Sdk {
    /// `mcp==1.30.0`, protocol 2025-11-25.
    Mcp,
    /// `fastmcp[tasks]==4.1.4`, protocol 2026-07-28 with the tasks extension.
    FastMcp,
}

impl Sdk {
    fn venv(self) -> (&'static str, &'static str) {
        match self {
            Sdk::Mcp => ("venv-mcp", "mcp==1.30.0"),
            Sdk::FastMcp => ("venv-fastmcp", "fastmcp[tasks]==4.1.4"),
        }
    }

    fn script(self) -> &'static str {
        match self {
            Sdk::Mcp => "v1_server.py",
            Sdk::FastMcp => "v2_server.py",
        }
    }
}

fn tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Installs the SDK's venv (once; concurrent tests and runs wait on a lock)
/// and returns its python.
async fn python(sdk: Sdk) -> Result<PathBuf> {
    let (dir, pin) = sdk.venv();
    let lib = tests_dir().join("mcp/lib.sh");
    let script = format!(
        "set -e; . '{}'; exec 9>\"$BATON_TOOLS_DIR/.{dir}.lock\"; flock 9; venv_dir \"$BATON_TOOLS_DIR/{dir}\" '{pin}'; \
         echo \"$BATON_TOOLS_DIR/{dir}/bin/python\"",
        lib.display()
    );
    let out = Command::new("bash").arg("-c").arg(script).output().await?;
    if !out.status.success() {
        bail!("installing {pin} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let path = String::from_utf8(out.stdout)?.lines().last().map(str::to_owned).ok_or_else(|| anyhow!("no python"))?;
    Ok(PathBuf::from(path))
}

/// The python of the `fastmcp[tasks]` venv (installed on first use).
pub(crate) async fn fastmcp_python() -> Result<PathBuf> {
    python(Sdk::FastMcp).await
}

/// A third-party MCP server process, killed when dropped.
struct PyServer {
    _child: Child,
    port: u16,
    sdk: Sdk,
    http: reqwest::Client,
}

impl PyServer {
    async fn start(sdk: Sdk) -> Result<PyServer> {
        let python = python(sdk).await?;
        let mut child = Command::new(python)
            .arg(tests_dir().join("mcp/remote").join(sdk.script()))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONWARNINGS", "ignore::DeprecationWarning")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
        let mut lines = BufReader::new(stdout).lines();
        let port = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(p) = line.strip_prefix("PORT ") {
                    return Ok::<u16, anyhow::Error>(p.trim().parse()?);
                }
            }
            bail!("the server exited before listening")
        })
        .await
        .context("server start")??;
        crate::harness::install_crypto_provider();
        let http = reqwest::Client::new();
        let server = PyServer { _child: child, port, sdk, http };
        eventually(Duration::from_secs(30), "the server to answer", || async {
            Ok(server.tools_calls().await.ok().map(|_| ()))
        })
        .await?;
        Ok(server)
    }

    fn url(&self) -> String {
        match self.sdk {
            // Starlette mounts the SDK's app under `/mcp/`.
            Sdk::Mcp => format!("http://127.0.0.1:{}/mcp/", self.port),
            Sdk::FastMcp => format!("http://127.0.0.1:{}/mcp", self.port),
        }
    }

    /// `worker.remote_servers` for a worker serving this server.
    fn remote_servers(&self) -> String {
        format!("[{{url: \"{}\", toolkit_name: Py, toolkit_version: \"1\"}}]", self.url())
    }

    async fn tools_calls(&self) -> Result<u64> {
        let v: Value = self.http.get(format!("http://127.0.0.1:{}/stats", self.port)).send().await?.json().await?;
        v["tools_call"].as_u64().ok_or_else(|| anyhow!("no count in {v}"))
    }
}

async fn cluster(server: &PyServer) -> Result<Cluster> {
    let mut c = Cluster::new(Settings::default()).await?;
    c.start_coordinator().await?;
    c.start_gateway(0).await?;
    c.start_worker_remote(0, &server.remote_servers()).await?;
    Ok(c)
}

fn execution_id(r: &crate::harness::Reply) -> Result<String> {
    r.json()["execution_id"].as_str().map(str::to_owned).ok_or_else(|| anyhow!("no id: {}", r.json()))
}

/// The request key of the execution's input request, once it asks.
async fn input_request(rest: &crate::harness::Rest, id: &str) -> Result<String> {
    eventually(Duration::from_secs(30), "an input request", || async {
        let v = rest.get(&format!("/tool-executions/{id}?wait_ms=2000")).await?.json();
        if v["status"] == "failed" {
            bail!("failed: {v}");
        }
        Ok(v["input_requests"][0]["request_key"]
            .as_str()
            .filter(|_| v["status"] == "input_required")
            .map(str::to_owned))
    })
    .await
}

/// Starts `tool`, waits for its input request, answers over REST; returns the final view.
async fn answered_over_rest(sdk: Sdk) -> Result<()> {
    let server = PyServer::start(sdk).await?;
    let c = cluster(&server).await?;
    let rest = c.rest(0, &c.id.user_token);
    let started = rest.start("ask_name", json!({}), None).await?;
    assert_eq!(started.status, 202, "{}", started.json());
    let id = execution_id(&started)?;
    let key = input_request(&rest, &id).await?;
    let view = rest.get(&format!("/tool-executions/{id}")).await?.json();
    assert_eq!(view["input_requests"][0]["message"], "Your name?", "{view}");
    let answer = json!({"request_key": key, "response": {"action": "accept", "content": {"name": "Ada"}}});
    let acked = rest.post(&format!("/tool-executions/{id}/input"), answer).await?;
    assert_eq!(acked.status, 200, "{}", acked.json());
    let done = rest.until_terminal(&id, Duration::from_secs(60)).await?;
    assert_eq!(done["status"], "completed", "{done}");
    let result = rest.get(&format!("/tool-executions/{id}/result")).await?.json();
    assert_eq!(result["result"]["content"][0]["text"], "Hello Ada", "{result}");
    assert_eq!(server.tools_calls().await?, 1, "one tools/call");
    Ok(())
}

#[tokio::test]
async fn mcp_v1_input_answered_over_rest() {
    answered_over_rest(Sdk::Mcp).await.expect("mcp==1.30.0");
}

#[tokio::test]
async fn fastmcp_v2_input_answered_over_rest() {
    answered_over_rest(Sdk::FastMcp).await.expect("fastmcp[tasks]==4.1.4");
}

/// A caller's trace continues into the remote MCP server: the `tools/call` the
/// worker sends carries the execution's W3C context as a header and in `_meta`
/// (with tracing on: spans export to a collector).
#[tokio::test]
async fn telemetry_a_callers_trace_reaches_the_remote_server() {
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let otlp = listener.local_addr().expect("addr");
    let collector = crate::tracing_export::Collector::default();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(collector))
            .serve_with_incoming(crate::tracing_export::tokio_stream_listener(listener)),
    );
    let server = PyServer::start(Sdk::Mcp).await.expect("mcp==1.30.0");
    let mut c = Cluster::new(Settings { otlp_endpoint: Some(format!("http://{otlp}")), ..Settings::default() })
        .await
        .expect("cluster");
    c.start_coordinator().await.expect("coordinator");
    c.start_gateway(0).await.expect("gateway");
    c.start_worker_remote(0, &server.remote_servers()).await.expect("worker");
    let rest = c.rest(0, &c.id.user_token);
    let trace = "5b8efff798038103d269b633813fc60c";
    let body = json!({"gateway_id": c.id.gateway_id, "tool_name": "slow_echo", "input": {"text": "t", "seconds": 0.1}});
    let started = rest
        .http
        .post(format!("{}/tool-executions", rest.base))
        .bearer_auth(&rest.token)
        .header("traceparent", format!("00-{trace}-eee19b7ec3c1b174-01"))
        .json(&body)
        .send()
        .await
        .expect("start");
    let v: Value = started.json().await.expect("json");
    let id = v["execution_id"].as_str().expect("id").to_owned();
    let done = rest.until_terminal(&id, Duration::from_secs(60)).await.expect("terminal");
    assert_eq!(done["status"], "completed", "{done}");
    let stats: Value = server
        .http
        .get(format!("http://127.0.0.1:{}/stats", server.port))
        .send()
        .await
        .expect("stats")
        .json()
        .await
        .expect("json");
    for field in ["traceparent_header", "traceparent_meta"] {
        let seen = stats[field].as_str().unwrap_or_default();
        assert!(seen.starts_with(&format!("00-{trace}-")), "{field}: {stats}");
    }
}

/// Current tool policy is re-evaluated before input reaches the owner: an
/// answer to a tool disabled since it asked is refused, and the remote server
/// never hears of it; re-enabled, the same answer goes through.
#[tokio::test]
async fn a_disabled_remote_tool_refuses_input_before_the_server_hears_it() {
    let server = PyServer::start(Sdk::FastMcp).await.expect("server");
    let c = cluster(&server).await.expect("cluster");
    let rest = c.rest(0, &c.id.user_token);
    let id = execution_id(&rest.start("ask_name", json!({}), None).await.expect("start")).expect("id");
    let key = input_request(&rest, &id).await.expect("input request");
    let project = c.id.project_id.clone();
    c.admin(&["disable-tool", "--project", &project, "--tool", "ask_name"]).await.expect("disable");
    let answer = json!({"request_key": key, "response": {"action": "accept", "content": {"name": "Ada"}}});
    let refused = rest.post(&format!("/tool-executions/{id}/input"), answer.clone()).await.expect("input");
    assert_eq!((refused.status, refused.json()["error"]["code"].clone()), (403, json!("policy_refused")));
    let view = rest.get(&format!("/tool-executions/{id}")).await.expect("get").json();
    assert_eq!(view["status"], "input_required", "nothing was relayed: {view}");
    c.admin(&["enable-tool", "--project", &project, "--tool", "ask_name"]).await.expect("enable");
    let acked = rest.post(&format!("/tool-executions/{id}/input"), answer).await.expect("input");
    assert_eq!(acked.status, 200, "{}", acked.json());
    let done = rest.until_terminal(&id, Duration::from_secs(60)).await.expect("terminal");
    let result = rest.get(&format!("/tool-executions/{id}/result")).await.expect("result").json();
    assert_eq!(
        (done["status"].as_str(), result["result"]["content"][0]["text"].as_str()),
        (Some("completed"), Some("Hello Ada"))
    );
    assert_eq!(server.tools_calls().await.expect("calls"), 1, "one tools/call");
}

/// kill -9 of the worker while the remote task runs: another worker resumes
/// the recorded task; the server saw one tools/call; the execution completes.
async fn resumed_after_kill9(sdk: Sdk) -> Result<()> {
    let server = PyServer::start(sdk).await?;
    let mut c = cluster(&server).await?;
    let rest = c.rest(0, &c.id.user_token);
    let started = rest.start("slow_echo", json!({"text": "survived", "seconds": 8}), None).await?;
    let id = execution_id(&started)?;
    let recorded = format!("SELECT COUNT(*) FROM executions WHERE id = '{id}' AND remote_task_id IS NOT NULL");
    eventually(Duration::from_secs(30), "the remote task to be recorded", || async {
        Ok((c.scalar(&recorded).await? == 1).then_some(()))
    })
    .await?;
    c.workers[0].kill9();
    c.start_worker_remote(0, &server.remote_servers()).await?;
    let done = rest.until_terminal(&id, Duration::from_secs(60)).await?;
    assert_eq!(done["status"], "completed", "{done}");
    let result = rest.get(&format!("/tool-executions/{id}/result")).await?.json();
    assert_eq!(result["result"]["content"][0]["text"], "survived", "{result}");
    assert_eq!(server.tools_calls().await?, 1, "exactly one tools/call across both workers");
    Ok(())
}

#[tokio::test]
async fn mcp_v1_kill9_worker_resumes_without_a_second_call() {
    resumed_after_kill9(Sdk::Mcp).await.expect("mcp==1.30.0");
}

#[tokio::test]
async fn fastmcp_v2_kill9_worker_resumes_without_a_second_call() {
    resumed_after_kill9(Sdk::FastMcp).await.expect("fastmcp[tasks]==4.1.4");
}

/// A remote sampling request fails the execution `unsupported_interaction`
/// without calling the tool again.
async fn sampling_is_unsupported(sdk: Sdk) -> Result<()> {
    let server = PyServer::start(sdk).await?;
    let c = cluster(&server).await?;
    let rest = c.rest(0, &c.id.user_token);
    let id = execution_id(&rest.start("ask_sample", json!({}), None).await?)?;
    let done = rest.until_terminal(&id, Duration::from_secs(60)).await?;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["failure_reason"], "unsupported_interaction", "{done}");
    assert!(done["error_message"].as_str().unwrap_or_default().contains("sampling/createMessage"), "{done}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(server.tools_calls().await?, 1, "one tools/call");
    Ok(())
}

#[tokio::test]
async fn mcp_v1_sampling_fails_unsupported_interaction() {
    sampling_is_unsupported(Sdk::Mcp).await.expect("mcp==1.30.0");
}

#[tokio::test]
async fn fastmcp_v2_sampling_fails_unsupported_interaction() {
    sampling_is_unsupported(Sdk::FastMcp).await.expect("fastmcp[tasks]==4.1.4");
}

/// The gateway's MCP endpoint, JSON-RPC by hand: what each dialect's client sends.
struct Mcp {
    http: reqwest::Client,
    url: String,
    token: String,
    session: Option<String>,
    modern: bool,
}

const META_V2: &str = r#"{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientInfo": {"name": "baton-it", "version": "1"},
  "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}}"#;

impl Mcp {
    fn new(c: &Cluster, modern: bool) -> Mcp {
        Mcp {
            http: c.http.clone(),
            url: format!("http://{}/mcp/{}", c.gateways[0].addr, c.id.gateway_id),
            token: c.id.user_token.clone(),
            session: None,
            modern,
        }
    }

    async fn post(&self, body: Value, name: Option<&str>) -> Result<reqwest::Response> {
        let method = body["method"].as_str().unwrap_or_default().to_owned();
        let mut req = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if self.modern {
            req = req.header("mcp-protocol-version", "2026-07-28").header("mcp-method", method);
            if let Some(n) = name {
                req = req.header("mcp-name", n);
            }
        } else if let Some(s) = &self.session {
            req = req.header("mcp-protocol-version", "2025-11-25").header("mcp-session-id", s);
        }
        Ok(req.send().await?)
    }

    /// One request; the first JSON-RPC response in the body (JSON or SSE).
    async fn call(&self, id: i64, method: &str, mut params: Value, name: Option<&str>) -> Result<Value> {
        if self.modern && params.get("_meta").is_none() {
            params["_meta"] = serde_json::from_str(META_V2)?;
        }
        let resp = self.post(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}), name).await?;
        let text = resp.text().await?;
        let msg = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .chain(std::iter::once(text.trim()))
            .find_map(|d| serde_json::from_str::<Value>(d).ok().filter(|v| v["id"] == id))
            .ok_or_else(|| anyhow!("{method}: no response in {text}"))?;
        msg.get("result").cloned().ok_or_else(|| anyhow!("{method}: {msg}"))
    }
}

/// The owner answers over MCP: `v2` through tasks/update (the remote server
/// speaks 2025-11-25), `v1` as the response to the elicitation on tasks/result
/// (the remote server speaks 2026-07-28): each client dialect against the other
/// remote dialect.
async fn answered_over_mcp(sdk: Sdk, modern: bool) -> Result<()> {
    let server = PyServer::start(sdk).await?;
    let c = cluster(&server).await?;
    let mut mcp = Mcp::new(&c, modern);
    if !modern {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "baton-it", "version": "1"}}});
        let resp = mcp.post(init, None).await?;
        mcp.session = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        resp.text().await?;
        mcp.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), None).await?;
    }
    let mut args = json!({"name": "ask_name", "arguments": {}});
    if !modern {
        args["task"] = json!({"ttl": 120_000});
    }
    let mut created = mcp.call(2, "tools/call", args.clone(), Some("ask_name")).await?;
    let mut answered_in_first_round = false;
    if modern && created["resultType"] == "input_required" {
        // The tool asked within the first-input window: the call answers with
        // an input round, and its retry carries the answer and returns the task.
        let key = created["inputRequests"].as_object().and_then(|m| m.keys().next().cloned());
        let key = key.ok_or_else(|| anyhow!("no input request: {created}"))?;
        let mut retry = args;
        retry["requestState"] = created["requestState"].clone();
        retry["inputResponses"] = json!({key: {"action": "accept", "content": {"name": "Ada"}}});
        created = mcp.call(3, "tools/call", retry, Some("ask_name")).await?;
        answered_in_first_round = true;
    }
    let task_id = created["taskId"].as_str().or(created["task"]["taskId"].as_str()).map(str::to_owned);
    let task_id = task_id.ok_or_else(|| anyhow!("no task: {created}"))?;
    let text = if modern {
        if !answered_in_first_round {
            let key = eventually(Duration::from_secs(40), "inputRequests", || async {
                let got = mcp.call(3, "tasks/get", json!({"taskId": task_id}), Some(&task_id)).await?;
                Ok(got["inputRequests"].as_object().and_then(|m| m.keys().next().cloned()))
            })
            .await?;
            let answer =
                json!({"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}}});
            mcp.call(4, "tasks/update", answer, Some(&task_id)).await?;
        }
        let done = eventually(Duration::from_secs(40), "completion", || async {
            let got = mcp.call(5, "tasks/get", json!({"taskId": task_id}), Some(&task_id)).await?;
            Ok((got["status"] != "working" && got["status"] != "input_required").then_some(got))
        })
        .await?;
        assert_eq!(done["status"], "completed", "{done}");
        done["result"]["content"][0]["text"].clone()
    } else {
        legacy_answer(&mcp, &task_id).await?
    };
    assert_eq!(text, "Hello Ada");
    assert_eq!(server.tools_calls().await?, 1, "one tools/call");
    Ok(())
}

/// 2026-07-28 without the tasks extension: the call itself carries the input
/// round (an InputRequiredResult, then a retry with the answer and the
/// `requestState`), and the remote tool still runs once.
#[tokio::test]
async fn fastmcp_v2_input_answered_through_an_mrtr_round() {
    let server = PyServer::start(Sdk::FastMcp).await.expect("fastmcp[tasks]==4.1.4");
    let c = cluster(&server).await.expect("cluster");
    let mcp = Mcp::new(&c, true);
    let mut meta: Value = serde_json::from_str(META_V2).expect("meta");
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    let call = json!({"name": "ask_name", "arguments": {}, "_meta": meta});
    let first = mcp.call(2, "tools/call", call.clone(), Some("ask_name")).await.expect("first round");
    assert_eq!(first["resultType"], "input_required", "{first}");
    assert!(first.get("taskId").is_none(), "no task for a client without the extension: {first}");
    let (key, request) = first["inputRequests"].as_object().and_then(|m| m.iter().next()).expect("a request");
    assert_eq!(
        (&request["method"], &request["params"]["message"]),
        (&json!("elicitation/create"), &json!("Your name?"))
    );
    let mut retry = call;
    retry["requestState"] = first["requestState"].clone();
    retry["inputResponses"] = json!({key.as_str(): {"action": "accept", "content": {"name": "Ada"}}});
    let done = mcp.call(3, "tools/call", retry, Some("ask_name")).await.expect("second round");
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(done["content"][0]["text"], "Hello Ada", "{done}");
    assert_eq!(server.tools_calls().await.expect("stats"), 1, "one tools/call reached the remote server");
}

/// 2025-11-25: read tasks/result; answer its elicitation/create; return the result text.
async fn legacy_answer(mcp: &Mcp, task_id: &str) -> Result<Value> {
    let mut resp = mcp
        .post(json!({"jsonrpc": "2.0", "id": 9, "method": "tasks/result", "params": {"taskId": task_id}}), None)
        .await?;
    let mut buf = String::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < until {
        let Some(chunk) = tokio::time::timeout(Duration::from_secs(60), resp.chunk()).await?? else { break };
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            let Some(data) = event.lines().find_map(|l| l.strip_prefix("data:")).map(str::trim) else { continue };
            let Ok(msg) = serde_json::from_str::<Value>(data) else { continue };
            if msg["method"] == "elicitation/create" {
                assert_eq!(msg["params"]["message"], "Your name?", "{msg}");
                let answer = json!({"jsonrpc": "2.0", "id": msg["id"], "result": {"action": "accept", "content": {"name": "Ada"}}});
                let r = mcp.post(answer, None).await?;
                assert!(r.status().is_success(), "answer: {}", r.status());
            } else if msg["id"] == 9 {
                return Ok(msg["result"]["content"][0]["text"].clone());
            }
        }
    }
    bail!("tasks/result ended without a result: {buf}")
}

#[tokio::test]
async fn v2_client_answers_a_v1_remote_in_the_first_round_or_over_tasks_update() {
    answered_over_mcp(Sdk::Mcp, true).await.expect("tasks/update");
}

#[tokio::test]
async fn v1_client_answers_a_v2_remote_on_tasks_result() {
    answered_over_mcp(Sdk::FastMcp, false).await.expect("tasks/result elicitation");
}

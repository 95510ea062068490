//! `docs/writing-tools.md`, followed to the letter: its `sh` blocks are run as
//! written, in order, by bash in a fresh directory (the Rust path, then the
//! Python path with `fastmcp` from the same venv as `remote_mcp`), with
//! `baton` and `hello-worker` on `PATH`. What the guide says the reader will
//! see is then checked in the files its commands `tee`.

use anyhow::{Context as _, Result, anyhow, bail};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

fn guide() -> Result<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/writing-tools.md");
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// The guide's two parts: before and after the Python heading.
fn parts(text: &str) -> Result<(&str, &str)> {
    text.split_once("## The Python path").ok_or_else(|| anyhow!("the guide has no Python section"))
}

/// The bodies of the fenced blocks tagged `tag`, in order.
fn blocks(text: &str, tag: &str) -> Vec<String> {
    let fence = format!("```{tag}\n");
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&fence) {
        let body = &rest[start + fence.len()..];
        let Some(end) = body.find("```") else { break };
        out.push(body[..end].to_owned());
        rest = &body[end + 3..];
    }
    out
}

/// Kills the script's whole process group (the background `baton dev`,
/// workers and servers it started) when the test ends, however it ends.
struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill").args(["-TERM", "--", &format!("-{}", self.0)]).status();
    }
}

/// Runs `blocks` as one bash script in `dir`; returns its output.
async fn run(dir: &Path, blocks: &[String], path: &str, env: &[(&str, String)]) -> Result<(String, Group)> {
    let script = format!("set -euo pipefail\n{}", blocks.join("\n"));
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("PATH", path)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn()?;
    let group = Group(child.id().ok_or_else(|| anyhow!("no pid"))?);
    let out = tokio::time::timeout(Duration::from_secs(240), child.wait_with_output())
        .await
        .context("the guide's commands did not finish in time")??;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        let logs = ["baton-dev.log", "hello-worker.log", "baton-dev-py.log", "greet-server.log"]
            .iter()
            .map(|f| format!("--- {f}\n{}", std::fs::read_to_string(dir.join(f)).unwrap_or_default()))
            .collect::<String>();
        bail!("the guide's commands failed ({}):\n{text}\n{logs}", out.status);
    }
    Ok((text, group))
}

fn json(dir: &Path, file: &str) -> Result<Value> {
    let text = std::fs::read_to_string(dir.join(file)).with_context(|| format!("{file} was not written"))?;
    serde_json::from_str(&text).with_context(|| format!("{file}: {text}"))
}

fn fresh_dir(name: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("baton-{name}-{}", crate::harness::random_suffix()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// `baton` and `hello-worker` (built next to it by `cargo build --workspace`) first on PATH.
fn path_with(extra: &[&Path]) -> Result<String> {
    let bin = crate::harness::baton_bin();
    let bin_dir = bin.parent().ok_or_else(|| anyhow!("no binary directory"))?;
    if !bin_dir.join("hello-worker").exists() {
        bail!("{} has no hello-worker: run `cargo build --workspace` first", bin_dir.display());
    }
    let mut dirs: Vec<String> = extra.iter().map(|d| d.display().to_string()).collect();
    dirs.push(bin_dir.display().to_string());
    dirs.push(std::env::var("PATH").unwrap_or_default());
    Ok(dirs.join(":"))
}

fn tool<'a>(list: &'a Value, name: &str) -> Result<&'a Value> {
    list["result"]["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == name))
        .ok_or_else(|| anyhow!("{name} is not in tools/list: {list}"))
}

#[tokio::test]
async fn the_rust_guide_works_as_written() -> Result<()> {
    let text = guide()?;
    let (rust, _) = parts(&text)?;
    let dir = fresh_dir("guide")?;
    let (_, _group) = run(&dir, &blocks(rust, "sh"), &path_with(&[])?, &[]).await?;

    // REST: the typed tool ran and answered with its structured output.
    let result = json(&dir, "greet-result.json")?;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["result"]["structuredContent"]["greeting"], "Bonjour, Ada!", "{result}");
    // Progress reached the REST owner view while the tool worked.
    let progress = json(&dir, "greet-progress.json")?;
    assert_eq!(progress["progress"]["total"], 5.0, "{progress}");
    assert!(progress["progress"]["message"].as_str().is_some_and(|m| m.starts_with("step ")), "{progress}");
    let history = json(&dir, "greet-history.json")?;
    assert_eq!(history["progress"]["message"], "step 5 of 5", "the last report stays on the record: {history}");
    // Bad input is refused naming the path: an `anyOf` and a `pattern` case.
    let anyof = json(&dir, "bad-anyof.json")?;
    assert_eq!(anyof["error"]["code"], "invalid_input", "{anyof}");
    assert!(anyof["error"]["message"].as_str().is_some_and(|m| m.contains("`/to`") && m.contains("anyOf")), "{anyof}");
    let pattern = json(&dir, "bad-pattern.json")?;
    assert_eq!(pattern["error"]["code"], "invalid_input", "{pattern}");
    assert!(pattern["error"]["message"].as_str().is_some_and(|m| m.contains("`/language`")), "{pattern}");

    // MCP 2026-07-28: the typed tool's metadata and schemas in tools/list.
    let tools = json(&dir, "tools.json")?;
    let greet = tool(&tools, "Hello.Greet")?;
    assert_eq!(greet["title"], "Greet someone", "{greet}");
    assert_eq!(greet["annotations"]["readOnlyHint"], true, "{greet}");
    assert_eq!(greet["outputSchema"]["properties"]["greeting"]["type"], "string", "{greet}");
    assert_eq!(greet["inputSchema"]["required"], serde_json::json!(["to"]), "{greet}");
    assert_eq!(tool(&tools, "Hello.Countdown")?["title"], "Count down");
    let called = json(&dir, "mcp-greet.json")?;
    assert_eq!(called["result"]["structuredContent"]["greeting"], "Hello, all 3 of you!", "{called}");
    // A task, polled, then cancelled: the tool honoured the cancellation.
    let task = json(&dir, "mcp-task.json")?;
    assert_eq!(task["result"]["resultType"], "task", "{task}");
    let got = json(&dir, "mcp-task-get.json")?;
    assert_eq!(got["result"]["taskId"], task["result"]["taskId"], "{got}");
    assert!(got["result"]["statusMessage"].as_str().is_some_and(|m| m.ends_with(" s left")), "{got}");
    let countdown = json(&dir, "countdown.json")?;
    assert_eq!(countdown["status"], "cancelled", "{countdown}");

    // MCP 2025-11-25: a task through the session's `task` member.
    let legacy = json(&dir, "legacy-task.json")?;
    assert!(legacy["result"]["task"]["taskId"].is_string(), "{legacy}");
    let legacy_get = json(&dir, "legacy-task-get.json")?;
    assert_eq!(legacy_get["result"]["taskId"], legacy["result"]["task"]["taskId"], "{legacy_get}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::test]
async fn the_python_guide_works_as_written_with_fastmcp() -> Result<()> {
    let text = guide()?;
    let (_, python_part) = parts(&text)?;
    let dir = fresh_dir("guide-py")?;
    let server = blocks(python_part, "python").into_iter().next().ok_or_else(|| anyhow!("no python block"))?;
    std::fs::write(dir.join("greet_server.py"), server)?;
    let python = crate::remote_mcp::fastmcp_python().await?;
    let venv_bin = python.parent().ok_or_else(|| anyhow!("no venv bin"))?;
    let port = tokio::net::TcpListener::bind("127.0.0.1:0").await?.local_addr()?.port();
    let env = [("PORT", port.to_string())];
    let (_, _group) = run(&dir, &blocks(python_part, "sh"), &path_with(&[venv_bin])?, &env).await?;

    // The remote server's own metadata reaches Baton's tools/list.
    let tools = json(&dir, "py-tools.json")?;
    let greet = tool(&tools, "py_greet")?;
    assert_eq!(greet["title"], "Greet in Python", "{greet}");
    assert_eq!(greet["annotations"]["readOnlyHint"], true, "{greet}");
    assert_eq!(greet["annotations"]["destructiveHint"], false, "{greet}");
    assert_eq!(greet["outputSchema"]["properties"]["greeting"]["type"], "string", "{greet}");
    let called = json(&dir, "py-greet.json")?;
    assert_eq!(called["result"]["structuredContent"]["greeting"], "Hello, Ada!", "{called}");
    // Pydantic's `pattern` and `anyOf`, checked by Baton, which names the path.
    for (file, path) in [("py-bad-pattern.json", "`/name`"), ("py-bad-anyof.json", "`/times`")] {
        let bad = json(&dir, file)?;
        assert_eq!(bad["result"]["isError"], true, "{bad}");
        let text = bad["result"]["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains(path), "{file}: {bad}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Progress on a legacy SSE stream: a 2025-11-25 call without a task that
/// outlives the foreground budget waits on SSE (the compatibility handle is
/// off here), and a caller that sent a `progressToken` receives the tool's
/// reports as `notifications/progress` before the result.
#[tokio::test]
async fn legacy_sse_callers_with_a_progress_token_get_notifications_progress() -> Result<()> {
    use crate::harness::{Cluster, Settings};
    let mut c = Cluster::new(Settings::default()).await?;
    let co = c.start_coordinator().await?;
    let gateway_env = [
        ("BATON_FEATURES__MCP_TASKS_COMPATIBILITY", "false".to_owned()),
        ("BATON_GATEWAY__FOREGROUND_BUDGET_MS", "100".to_owned()),
    ];
    c.start_gateway_with(co, &gateway_env).await?;
    c.start_worker(co).await?;
    let url = format!("http://{}/mcp/{}", c.gateways[0].addr, c.id.gateway_id);
    let post = |body: Value, session: Option<&str>| {
        let mut req = c
            .http
            .post(&url)
            .bearer_auth(&c.id.user_token)
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(s) = session {
            req = req.header("mcp-session-id", s).header("mcp-protocol-version", "2025-11-25");
        }
        req.send()
    };
    let init = post(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "baton-it", "version": "1"}}}),
        None,
    )
    .await?;
    let session = init
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("no session id"))?;
    post(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), Some(&session)).await?;
    // The worker registers its tools just after the gateway is ready.
    let body = crate::harness::eventually(Duration::from_secs(30), "Demo.Sleep answered", || async {
        let r = post(
            serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "Demo.Sleep",
                "arguments": {"seconds": 1.5}, "_meta": {"progressToken": "tok-1"}}}),
            Some(&session),
        )
        .await?;
        let text = r.text().await?;
        Ok((!text.contains("unknown tool")).then_some(text))
    })
    .await?;
    let messages: Vec<Value> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect();
    let progress = messages
        .iter()
        .find(|m| m["method"] == "notifications/progress")
        .ok_or_else(|| anyhow!("no notifications/progress in {body}"))?;
    assert_eq!(progress["params"]["progressToken"], "tok-1", "{progress}");
    assert_eq!(progress["params"]["message"], "sleeping 1.5 s", "{progress}");
    let last = messages.last().ok_or_else(|| anyhow!("empty stream"))?;
    assert_eq!(last["id"], 2, "the result comes last: {body}");
    assert!(last["result"]["content"].is_array(), "{last}");
    Ok(())
}

/// Progress counts only from the worker holding the attempt's lease: another
/// worker of the same project reporting for it changes nothing.
#[tokio::test]
async fn progress_from_a_worker_not_holding_the_lease_changes_nothing() -> Result<()> {
    use crate::harness::{Cluster, Settings, eventually};
    use baton_proto::worker::v1::{
        self as wpb, WorkerMessage, coordinator_message::Msg, settlement, worker_message,
        worker_session_client::WorkerSessionClient,
    };
    let mut c = Cluster::new(Settings::default()).await?;
    let co = c.start_coordinator().await?;
    c.start_gateway(co).await?;
    c.start_worker(co).await?;
    let rest = c.rest(0, &c.id.user_token);
    let id = eventually(Duration::from_secs(30), "Demo.Sleep started", || async {
        let r = rest.start("Demo.Sleep", serde_json::json!({"seconds": 30}), Some("progress-trust")).await?;
        Ok((r.status == 202).then(|| r.json()["execution_id"].as_str().map(str::to_owned)).flatten())
    })
    .await?;
    let honest = eventually(Duration::from_secs(30), "the holder's progress", || async {
        let v = rest.get(&format!("/tool-executions/{id}")).await?.json();
        Ok(v["progress"]["message"].as_str().map(str::to_owned))
    })
    .await?;
    assert_eq!(honest, "sleeping 30 s");

    let token = c.admin(&["create-worker-token", "--project", &c.id.project_id]).await?;
    let token = token["token"].as_str().ok_or_else(|| anyhow!("no token in {token}"))?.to_owned();
    let channel = crate::worker_trust::channel(&c, co, None).await?;
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let wrap = |m| WorkerMessage { msg: Some(m) };
    let register = wpb::Register {
        worker_id: "nosy".into(),
        worker_token: token,
        tools: vec![crate::worker_trust::tool("Nosy.Tool")],
        capacity: 1,
        ..Default::default()
    };
    tx.send(wrap(worker_message::Msg::Register(register))).await?;
    let mut incoming =
        WorkerSessionClient::new(channel).session(tokio_stream::wrappers::ReceiverStream::new(rx)).await?.into_inner();
    let forged =
        wpb::Progress { execution_id: id.clone(), attempt: 1, message: "forged".into(), current: 9.0, total: 9.0 };
    tx.send(wrap(worker_message::Msg::Progress(forged))).await?;
    // A settlement after it is refused with an answer: by then the progress was handled.
    let settle =
        wpb::Settlement { execution_id: id.clone(), attempt: 1, outcome: Some(settlement::Outcome::Cancelled(true)) };
    tx.send(wrap(worker_message::Msg::Settlement(settle))).await?;
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(m) = incoming.message().await? {
            if matches!(m.msg, Some(Msg::Refused(_))) {
                return Ok::<(), anyhow::Error>(());
            }
        }
        bail!("the session ended without refusing the settlement")
    })
    .await
    .context("no refusal")??;
    let v = rest.get(&format!("/tool-executions/{id}")).await?.json();
    assert_eq!(v["progress"]["message"], "sleeping 30 s", "the foreign report was dropped: {v}");
    assert_eq!(v["status"], "working", "{v}");
    Ok(())
}

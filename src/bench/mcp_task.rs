//! Scenario `mcp-task`: N `tools/call`s of `Demo.Echo` at protocol 2026-07-28
//! declaring the tasks extension, C in flight. A call answered with
//! `resultType: "task"` is polled with `tasks/get` every `--poll-ms` until the
//! result is inline; a call the gateway finished within its foreground budget
//! answers the tool result directly and is counted as "inline" (the server,
//! not the client, decides). After the run, start→tool-begins comes from the
//! caller's execution list (surface `mcp_native`), outside the timed window.

use super::report::{Table, num};
use super::stats::{Errors, Failure, Samples, Window};
use super::{Outcome, Settings, Target, drive, mcp, rest};
use baton_proto::coordinator::v1::Surface;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

struct Done {
    submitted: Instant,
    answered_ms: f64,
    visible: Instant,
    as_task: bool,
    polls: usize,
}

async fn one(t: &Target, i: usize, poll: Duration, deadline: Instant) -> Result<Done, Failure> {
    let text = format!("task-{}-{i}", t.run_id);
    let submitted = Instant::now();
    let answer = mcp::call_echo(t, &text, true).await?;
    let answered_ms = submitted.elapsed().as_secs_f64() * 1000.0;
    if answer.get("resultType").and_then(Value::as_str) != Some("task") {
        mcp::check_echo(&answer, &text)?;
        return Ok(Done { submitted, answered_ms, visible: Instant::now(), as_task: false, polls: 0 });
    }
    let task_id = answer.get("taskId").and_then(Value::as_str).ok_or(Failure::Shape("task without taskId"))?;
    let max_polls = (deadline.saturating_duration_since(submitted).as_millis() / poll.as_millis().max(1)) as usize;
    for polls in 1..=max_polls.max(1) {
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(poll).await;
        let task = mcp::get_task(t, task_id).await?;
        match task.get("status").and_then(Value::as_str) {
            Some("completed") => {
                let result = task.get("result").ok_or(Failure::Shape("completed task without result"))?;
                mcp::check_echo(result, &text)?;
                return Ok(Done { submitted, answered_ms, visible: Instant::now(), as_task: true, polls });
            }
            Some(s @ ("failed" | "cancelled")) => return Err(Failure::Ended(s.to_owned())),
            Some(_) => {}
            None => return Err(Failure::Shape("task without status")),
        }
    }
    Err(Failure::GaveUp)
}

pub(super) async fn run(target: Arc<Target>, s: Settings) -> Outcome {
    let started_ms = baton_proto::clock::now_ms();
    let deadline = Instant::now() + s.max_time;
    let (t, poll) = (target.clone(), s.poll);
    let answers = drive(s.executions, s.concurrency, deadline, move |i| {
        let t = t.clone();
        async move { one(&t, i, poll, deadline).await }
    })
    .await;
    let (mut answered, mut visible) = (Samples::default(), Samples::default());
    let mut window = Window::default();
    let mut errors = Errors::default();
    let (mut ok, mut tasks, mut polls) = (0usize, 0usize, 0usize);
    for answer in &answers {
        match answer {
            Ok(d) => {
                ok += 1;
                tasks += usize::from(d.as_task);
                polls += d.polls;
                window.record(d.submitted, d.visible);
                answered.push(d.answered_ms);
                visible.push_duration(d.visible - d.submitted);
            }
            Err(f) => errors.add(f),
        }
    }
    let begins = tool_begins(&target, started_ms - 1_000, answers.len()).await;

    let mut table = Table::new(format!(
        "mcp-task  (2026-07-28 tasks extension, Demo.Echo, N={}, C={})",
        s.executions, s.concurrency
    ));
    table.dist("tools/call answered", &answered);
    match &begins {
        Ok(b) => table.dist("start → tool-begins", b),
        Err(_) => table.dist("start → tool-begins", &Samples::default()),
    }
    table.dist("start → result-visible", &visible);
    table.value("completed", format!("{ok} of {} attempted", answers.len()));
    table.value("  answered as task", format!("{tasks} (then tasks/get every {} ms)", s.poll.as_millis()));
    table.value("  answered inline", format!("{} (finished within the gateway's foreground budget)", ok - tasks));
    if tasks > 0 {
        table.value("tasks/get polls per task", num(polls as f64 / tasks as f64));
    }
    table.value("throughput", window.rate(ok).map_or("n/a".into(), |r| format!("{} executions/s", num(r))));
    if let Err(f) = &begins {
        table.value("tool-begins unavailable", f.kind());
    }
    table.errors(&errors);
    Outcome { table, executions: ok }
}

/// `started_at − created_at` of this run's MCP-native Demo.Echo executions.
async fn tool_begins(t: &Target, since_ms: i64, max: usize) -> Result<Samples, Failure> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let views = rest::list_since(t, since_ms, max + 200, deadline).await?;
    let mut samples = Samples::default();
    for v in views.iter().filter(|v| {
        v.get("surface").and_then(Value::as_str) == Some(Surface::McpNative.name())
            && v.get("tool_name").and_then(Value::as_str) == Some("Demo.Echo")
    }) {
        if let Some(ms) = rest::start_to_begin_ms(v) {
            samples.push(ms);
        }
    }
    Ok(samples)
}

//! Scenario `rest-background`: N executions of `Demo.Echo` through REST with C
//! in flight. Each one is started (with an idempotency key), long-polled with
//! `wait_ms` until terminal, and its result read from `…/result`. Reports
//! throughput over first submit → last result, start→tool-begins (the view's
//! `started_at − created_at`, server clock), start→result-visible (client
//! clock), the POST latency, and failures by kind.

use super::report::{Table, num};
use super::stats::{Errors, Failure, Samples, Window};
use super::{Outcome, Settings, Target, drive, mcp, rest};
use baton_proto::coordinator::v1::ExecutionStatus;
use serde_json::json;
use std::sync::Arc;
use tokio::time::Instant;

struct Done {
    submitted: Instant,
    visible: Instant,
    post_ms: f64,
    begins_ms: Option<f64>,
}

async fn one(t: &Target, i: usize, deadline: Instant) -> Result<Done, Failure> {
    let text = format!("rest-{}-{i}", t.run_id);
    let submitted = Instant::now();
    let view = rest::start(t, "Demo.Echo", json!({"text": text}), &format!("bench-{text}")).await?;
    let post_ms = submitted.elapsed().as_secs_f64() * 1000.0;
    let id = view.get("execution_id").and_then(|v| v.as_str()).ok_or(Failure::Shape("no execution_id"))?;
    let done =
        if rest::status(&view).is_terminal() { view.clone() } else { rest::wait_terminal(t, id, deadline).await? };
    match rest::status(&done) {
        ExecutionStatus::Completed => {}
        other => return Err(Failure::Ended(other.name().to_owned())),
    }
    let result = rest::result(t, id, deadline).await?;
    let visible = Instant::now();
    let tool_result = result.get("result").ok_or(Failure::Shape("result without result"))?;
    mcp::check_echo(tool_result, &text)?;
    Ok(Done { submitted, visible, post_ms, begins_ms: rest::start_to_begin_ms(&done) })
}

pub(super) async fn run(target: Arc<Target>, s: Settings) -> Outcome {
    let deadline = Instant::now() + s.max_time;
    let t = target.clone();
    let answers = drive(s.executions, s.concurrency, deadline, move |i| {
        let t = t.clone();
        async move { one(&t, i, deadline).await }
    })
    .await;
    let (mut post, mut begins, mut visible) = (Samples::default(), Samples::default(), Samples::default());
    let mut window = Window::default();
    let mut errors = Errors::default();
    let mut ok = 0;
    for answer in &answers {
        match answer {
            Ok(d) => {
                ok += 1;
                window.record(d.submitted, d.visible);
                post.push(d.post_ms);
                if let Some(b) = d.begins_ms {
                    begins.push(b);
                }
                visible.push_duration(d.visible - d.submitted);
            }
            Err(f) => errors.add(f),
        }
    }
    let mut table = Table::new(format!("rest-background  (Demo.Echo, N={}, C={})", s.executions, s.concurrency));
    table.dist("submit (POST → 202)", &post);
    table.dist("start → tool-begins", &begins);
    table.dist("start → result-visible", &visible);
    table.value("completed", format!("{ok} of {} attempted", answers.len()));
    table.value("throughput", window.rate(ok).map_or("n/a".into(), |r| format!("{} executions/s", num(r))));
    table.value(
        "first submit → last result",
        window.span().map_or("n/a".into(), |d| format!("{:.2} s", d.as_secs_f64())),
    );
    table.errors(&errors);
    Outcome { table, executions: ok }
}

//! Scenario `foreground`: N `tools/call`s of `Demo.Echo` at protocol 2026-07-28
//! without the tasks extension, C in flight; each must answer the echoed text
//! in the same HTTP exchange (JSON or SSE). Reports call latency, the rate
//! over first call → last answer, and failures by kind — including calls the
//! gateway handed over instead of answering.

use super::report::{Table, num};
use super::stats::{Errors, Failure, Samples, Window};
use super::{Outcome, Settings, Target, drive, mcp};
use std::sync::Arc;
use tokio::time::Instant;

async fn one(t: &Target, i: usize) -> Result<(Instant, Instant), Failure> {
    let text = format!("fg-{}-{i}", t.run_id);
    let sent = Instant::now();
    let result = mcp::call_echo(t, &text, false).await?;
    mcp::check_echo(&result, &text)?;
    Ok((sent, Instant::now()))
}

pub(super) async fn run(target: Arc<Target>, s: Settings) -> Outcome {
    let deadline = Instant::now() + s.max_time;
    let t = target.clone();
    let answers = drive(s.executions, s.concurrency, deadline, move |i| {
        let t = t.clone();
        async move { one(&t, i).await }
    })
    .await;
    let mut latency = Samples::default();
    let mut window = Window::default();
    let mut errors = Errors::default();
    let mut ok = 0;
    for answer in &answers {
        match answer {
            Ok((sent, done)) => {
                ok += 1;
                window.record(*sent, *done);
                latency.push_duration(*done - *sent);
            }
            Err(f) => errors.add(f),
        }
    }
    let mut table =
        Table::new(format!("foreground  (tools/call Demo.Echo, no task, N={}, C={})", s.executions, s.concurrency));
    table.dist("tools/call → result", &latency);
    table.value("completed", format!("{ok} of {} attempted", answers.len()));
    table.value("rate", window.rate(ok).map_or("n/a".into(), |r| format!("{} calls/s", num(r))));
    table.errors(&errors);
    Outcome { table, executions: ok }
}

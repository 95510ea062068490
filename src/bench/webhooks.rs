//! Scenario `webhooks`: how fast lifecycle signals reach a receiver. The
//! benchmark runs its own receiver on loopback (so the deployment must allow
//! loopback targets: `baton dev` does, a cluster needs
//! `webhooks.allow_loopback_targets`), registers it with `--admin-key`, starts
//! N `Demo.Echo` executions with C in flight, and waits for every `completed`
//! signal. Reports signals delivered per second (first settlement → last
//! receipt) and settlement → receipt: the signal's `updated_at` (the
//! coordinator's clock at settlement) to its arrival (this machine's clock;
//! meaningful when both run on one host). The endpoint is deleted at the end.

use super::report::{Table, num};
use super::stats::{Errors, Failure, Samples};
use super::{Outcome, Settings, Target, drive, rest};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Receipts by execution id: (settled at, received at), epoch ms.
type Receipts = Arc<Mutex<HashMap<String, (i64, i64)>>>;

async fn receive(
    axum::extract::State(seen): axum::extract::State<Receipts>,
    body: axum::body::Bytes,
) -> axum::http::StatusCode {
    let at = baton_proto::clock::now_ms();
    let signal: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (Some(id), Some(settled)) = (signal["execution_id"].as_str(), rest::time_ms(&signal, "updated_at")) else {
        return axum::http::StatusCode::BAD_REQUEST;
    };
    if signal["state"] == "completed"
        && let Ok(mut seen) = seen.lock()
    {
        // A duplicate keeps the first receipt.
        seen.entry(id.to_owned()).or_insert((settled, at));
    }
    axum::http::StatusCode::NO_CONTENT
}

/// The REST base of webhooks, from the executions URL.
fn webhooks_url(t: &Target) -> String {
    t.executions_url.trim_end_matches("/tool-executions").to_owned() + "/webhooks"
}

pub(super) async fn run(target: Arc<Target>, s: Settings, admin_key: Option<&str>) -> Outcome {
    let mut table =
        Table::new(format!("webhooks  (Demo.Echo completed signals, N={}, C={})", s.executions, s.concurrency));
    let mut errors = Errors::default();
    let Some(admin_key) = admin_key else {
        table.value("skipped", "needs --admin-key (an admin API key of the project)");
        return Outcome { table, executions: 0 };
    };
    let seen: Receipts = Arc::default();
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            table.value("skipped", format!("no receiver: {e}"));
            return Outcome { table, executions: 0 };
        }
    };
    let url = listener.local_addr().map(|a| format!("http://{a}/signals")).unwrap_or_default();
    let app = axum::Router::new().route("/signals", axum::routing::post(receive)).with_state(seen.clone());
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    baton_worker::supervise::spawn_supervised("bench webhook receiver", async move {
        let _ = axum::serve(listener, app).with_graceful_shutdown(stopped.cancelled_owned()).await;
    });
    let created = target
        .http
        .post(webhooks_url(&target))
        .bearer_auth(admin_key)
        .json(&json!({"url": url, "event_type": "tool.execution.lifecycle"}))
        .send()
        .await;
    let webhook_id = match created {
        Ok(r) if r.status().as_u16() == 201 => {
            r.json::<Value>().await.ok().and_then(|v| v["webhook_id"].as_str().map(str::to_owned))
        }
        Ok(r) => {
            let status = r.status().as_u16();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            table.value("skipped", format!("creating the webhook answered {status}: {body}"));
            None
        }
        Err(e) => {
            table.value("skipped", format!("creating the webhook failed: {e}"));
            None
        }
    };
    let Some(webhook_id) = webhook_id else {
        stop.cancel();
        return Outcome { table, executions: 0 };
    };

    let deadline = Instant::now() + s.max_time;
    let t = target.clone();
    let started = drive(s.executions, s.concurrency, deadline, move |i| {
        let t = t.clone();
        async move {
            let text = format!("hook-{}-{i}", t.run_id);
            let view = rest::start(&t, "Demo.Echo", json!({"text": text}), &format!("bench-{text}")).await?;
            view.get("execution_id").and_then(Value::as_str).map(str::to_owned).ok_or(Failure::Shape("no execution_id"))
        }
    })
    .await;
    let mut ids = Vec::new();
    for s in started {
        match s {
            Ok(id) => ids.push(id),
            Err(f) => errors.add(&f),
        }
    }
    // Every started execution's signal, or the time bound.
    loop {
        let got = seen.lock().map(|m| ids.iter().filter(|id| m.contains_key(*id)).count()).unwrap_or(0);
        if got == ids.len() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let receipts: Vec<(i64, i64)> =
        seen.lock().map(|m| ids.iter().filter_map(|id| m.get(id).copied()).collect()).unwrap_or_default();
    for _ in receipts.len()..ids.len() {
        errors.add(&Failure::GaveUp);
    }
    let mut latency = Samples::default();
    for (settled, received) in &receipts {
        latency.push((*received - *settled).max(0) as f64);
    }
    let first = receipts.iter().map(|r| r.0).min();
    let last = receipts.iter().map(|r| r.1).max();
    table.dist("settlement → receipt", &latency);
    table.value("signals received", format!("{} of {} started", receipts.len(), ids.len()));
    let rate = match (first, last) {
        (Some(a), Some(b)) if b > a => Some(receipts.len() as f64 * 1000.0 / (b - a) as f64),
        _ => None,
    };
    table.value("throughput", rate.map_or("n/a".into(), |r| format!("{} signals delivered/s", num(r))));
    table.errors(&errors);
    let _ = target.http.delete(format!("{}/{webhook_id}", webhooks_url(&target))).bearer_auth(admin_key).send().await;
    stop.cancel();
    Outcome { table, executions: receipts.len() }
}

//! The REST calls the scenarios make — start, long-poll to a terminal status,
//! read the result, list the caller's executions — and the view fields they
//! read. Each call maps every non-success to a `Failure`; none retries except
//! where the API says "not yet" (202 from the result endpoint).

use super::Target;
use super::stats::Failure;
use baton_proto::coordinator::v1::ExecutionStatus;
use serde_json::{Value, json};
use std::time::Duration;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::time::Instant;

/// The long-poll window asked of the gateway (it allows up to 45 s).
pub(super) const WAIT_MS: u64 = 20_000;
/// At most this many polls per execution, whatever the time left.
const MAX_POLLS: usize = 1_000;

/// An RFC 3339 field of a view as epoch milliseconds.
pub(super) fn time_ms(view: &Value, field: &str) -> Option<i64> {
    let text = view.get(field)?.as_str()?;
    let t = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// A view's status; unspecified when it names none Baton knows.
pub(super) fn status(view: &Value) -> ExecutionStatus {
    view.get("status").and_then(Value::as_str).and_then(ExecutionStatus::from_name).unwrap_or_default()
}

/// Sends `req` with the bearer and a timeout, and returns status and JSON body.
async fn send(t: &Target, req: reqwest::RequestBuilder, timeout: Duration) -> Result<(u16, Value), Failure> {
    let resp = req.bearer_auth(&t.token).timeout(timeout).send().await.map_err(|e| Failure::transport(&e))?;
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.map_err(|e| Failure::transport(&e))?;
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok((status, body))
}

fn http_failure(status: u16, body: &Value) -> Failure {
    let code = body.pointer("/error/code").and_then(Value::as_str).map(str::to_owned);
    Failure::Http { status, code }
}

/// `POST /tool-executions` with an idempotency key; the 202 view.
pub(super) async fn start(t: &Target, tool: &str, input: Value, key: &str) -> Result<Value, Failure> {
    let body = json!({"gateway_id": t.gateway_id, "tool_name": tool, "input": input});
    let req = t.http.post(&t.executions_url).header("Idempotency-Key", key).json(&body);
    let (status, view) = send(t, req, Duration::from_secs(30)).await?;
    if status != 202 {
        return Err(http_failure(status, &view));
    }
    if view.get("execution_id").and_then(Value::as_str).is_none() {
        return Err(Failure::Shape("start answered without execution_id"));
    }
    Ok(view)
}

/// `GET /{id}?delivery=websocket`: the watch offer (its `websocket_url`, and
/// the owner view as it stands).
pub(super) async fn watch_offer(t: &Target, id: &str, timeout_seconds: u64) -> Result<Value, Failure> {
    let url = format!("{}/{id}?delivery=websocket&timeout_seconds={timeout_seconds}", t.executions_url);
    let (status, offer) = send(t, t.http.get(url), Duration::from_secs(30)).await?;
    if status != 200 {
        return Err(http_failure(status, &offer));
    }
    Ok(offer)
}

/// One `GET /{id}?wait_ms=…`.
pub(super) async fn wait_once(t: &Target, id: &str, wait_ms: u64) -> Result<Value, Failure> {
    let req = t.http.get(format!("{}/{id}?wait_ms={wait_ms}", t.executions_url));
    let (status, view) = send(t, req, Duration::from_millis(wait_ms + 15_000)).await?;
    if status != 200 {
        return Err(http_failure(status, &view));
    }
    Ok(view)
}

/// Long-polls until the execution is terminal, or `deadline`.
pub(super) async fn wait_terminal(t: &Target, id: &str, deadline: Instant) -> Result<Value, Failure> {
    for _ in 0..MAX_POLLS {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let wait_ms = (left.as_millis() as u64).clamp(1, WAIT_MS);
        let view = wait_once(t, id, wait_ms).await?;
        if status(&view).is_terminal() {
            return Ok(view);
        }
    }
    Err(Failure::GaveUp)
}

/// `GET /{id}/result` until it answers 200 (202 means "not yet"), or `deadline`.
pub(super) async fn result(t: &Target, id: &str, deadline: Instant) -> Result<Value, Failure> {
    for _ in 0..MAX_POLLS {
        let req = t.http.get(format!("{}/{id}/result", t.executions_url));
        let (status, body) = send(t, req, Duration::from_secs(30)).await?;
        match status {
            200 => return Ok(body),
            202 if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(5)).await,
            202 => break,
            _ => return Err(http_failure(status, &body)),
        }
    }
    Err(Failure::GaveUp)
}

/// The caller's executions created at or after `since_ms` (server clock),
/// newest first, walking the list endpoint's pages; at most `max_items`.
pub(super) async fn list_since(
    t: &Target,
    since_ms: i64,
    max_items: usize,
    deadline: Instant,
) -> Result<Vec<Value>, Failure> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    let max_pages = max_items / 200 + 5;
    for _ in 0..max_pages {
        if Instant::now() >= deadline {
            return Err(Failure::GaveUp);
        }
        let mut url = format!("{}?limit=200", t.executions_url);
        if let Some(c) = &cursor {
            url.push_str("&cursor=");
            url.push_str(&encode_query(c));
        }
        let (status, page) = send(t, t.http.get(url), Duration::from_secs(30)).await?;
        if status != 200 {
            return Err(http_failure(status, &page));
        }
        let items = page.get("items").and_then(Value::as_array).ok_or(Failure::Shape("list without items"))?;
        let mut older = false;
        for item in items {
            match time_ms(item, "created_at") {
                Some(c) if c >= since_ms => out.push(item.clone()),
                _ => older = true,
            }
        }
        cursor = page.get("next_cursor").and_then(Value::as_str).map(str::to_owned);
        if older || cursor.is_none() || out.len() >= max_items {
            return Ok(out);
        }
    }
    Ok(out)
}

/// Percent-encodes everything but unreserved characters.
fn encode_query(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `started_at − created_at` of a view, in milliseconds.
pub(super) fn start_to_begin_ms(view: &Value) -> Option<f64> {
    Some((time_ms(view, "started_at")? - time_ms(view, "created_at")?) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_times_parse_to_epoch_milliseconds() {
        let v = json!({"created_at": "2026-01-01T00:00:00.250Z", "started_at": "2026-01-01T00:00:01.000Z"});
        assert_eq!(time_ms(&v, "created_at"), Some(1_767_225_600_250));
        assert_eq!(start_to_begin_ms(&v), Some(750.0));
        assert_eq!(time_ms(&json!({"started_at": null}), "started_at"), None);
    }

    #[test]
    fn cursors_are_percent_encoded() {
        assert_eq!(encode_query("a+b/c=="), "a%2Bb%2Fc%3D%3D");
        assert_eq!(encode_query("Az09-_.~"), "Az09-_.~");
    }
}

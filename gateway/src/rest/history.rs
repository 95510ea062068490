//! The execution history under `/v1/orgs/{org_id}/projects/{project_id}/tool_executions`
//! (seed 002): every run of the project, newest first, with offset paging; a
//! count; one run with its timeline and attempts. Who may call what is the
//! coordinator's table (`authz::history`); the gateway parses the query (400
//! naming the parameter), makes one call and shapes the answer. List and count
//! never carry payloads; the detail carries them only when asked for.

pub(crate) mod openapi;

use super::{ExecutionPath, ScopePath};
use crate::app::AppState;
use crate::coordinator::Bearer;
use crate::coordinator::history::{HistoryQuery, Reveal};
use crate::error::ApiError;
use crate::json::rfc3339;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use baton_proto::coordinator::v1::{self as pb, ExecutionOutcome, FailureReason};
use baton_proto::error::ErrorCode;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub(crate) const BASE: &str = "/v1/orgs/{org_id}/projects/{project_id}/tool_executions";
/// The page size when `limit` is not given.
pub(crate) const DEFAULT_LIMIT: u32 = 100;
/// The largest `limit`.
pub(crate) const MAX_LIMIT: u32 = 1_000;
/// The largest `offset`.
pub(crate) const MAX_OFFSET: u32 = i32::MAX as u32;
/// Filter values are at most this many characters.
pub(crate) const MAX_FILTER_CHARS: usize = 512;

const FILTERS: [&str; 7] =
    ["tool_name", "toolkit_name", "user_id", "outcome", "failure_reason", "start_time", "end_time"];

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route(BASE, get(list))
        .route(&format!("{BASE}/count"), get(count))
        .route(&format!("{BASE}/{{execution_id}}"), get(detail))
}

pub(super) fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, message)
}

/// The query string's parameters: each known one at most once, nothing unknown
/// (a misspelt filter must not quietly widen an audit to the whole project).
#[derive(Debug)]
pub(super) struct Params(Vec<(String, String)>);

impl Params {
    pub(super) fn new(pairs: Vec<(String, String)>, known: &[&str]) -> Result<Params, ApiError> {
        for (i, (name, _)) in pairs.iter().enumerate() {
            if !known.contains(&name.as_str()) {
                return Err(invalid(format!("unknown query parameter `{name}`")));
            }
            if pairs[..i].iter().any(|(earlier, _)| earlier == name) {
                return Err(invalid(format!("`{name}` is given more than once")));
            }
        }
        Ok(Params(pairs))
    }

    /// The parameters of an offset-paged listing: `filters`, `limit` (1 to
    /// `max_limit`, default `default_limit`) and `offset`; the limit and offset read.
    pub(super) fn paged(
        pairs: Vec<(String, String)>,
        filters: &[&str],
        max_limit: u32,
        default_limit: u32,
    ) -> Result<(Params, u32, u32), ApiError> {
        let mut known = filters.to_vec();
        known.extend(["limit", "offset"]);
        let params = Params::new(pairs, &known)?;
        let limit = params.uint("limit", 1, max_limit, default_limit)?;
        let offset = params.uint("offset", 0, MAX_OFFSET, 0)?;
        Ok((params, limit, offset))
    }

    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub(super) fn text(&self, name: &str) -> Result<Option<String>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) if v.is_empty() || v.chars().count() > MAX_FILTER_CHARS || v.chars().any(char::is_control) => {
                Err(invalid(format!("`{name}` must be 1 to {MAX_FILTER_CHARS} characters without control characters")))
            }
            Some(v) => Ok(Some(v.to_owned())),
        }
    }

    pub(super) fn time(&self, name: &str) -> Result<Option<i64>, ApiError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        let bad = || invalid(format!("`{name}` must be an RFC 3339 timestamp, e.g. 2026-08-08T00:00:00Z"));
        let t = OffsetDateTime::parse(v, &Rfc3339).map_err(|_| bad())?;
        i64::try_from(t.unix_timestamp_nanos() / 1_000_000).map(Some).map_err(|_| bad())
    }

    pub(super) fn uint(&self, name: &str, min: u32, max: u32, default: u32) -> Result<u32, ApiError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => {
                let n = super::body::parse_bounded_int(v, name, i64::from(min), i64::from(max))?;
                u32::try_from(n).map_err(|_| invalid(format!("`{name}` must be between {min} and {max}")))
            }
        }
    }

    fn flag(&self, name: &str) -> Result<bool, ApiError> {
        match self.get(name) {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(_) => Err(invalid(format!("`{name}` must be true or false"))),
        }
    }

    /// A value from a fixed set of names; a value outside it is 400 listing the set.
    fn named<T>(
        &self,
        name: &str,
        parse: impl Fn(&str) -> Option<T>,
        names: impl Iterator<Item = &'static str>,
    ) -> Result<Option<T>, ApiError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        let known = || names.collect::<Vec<_>>().join(", ");
        parse(v).map(Some).ok_or_else(|| invalid(format!("`{name}` must be one of {}", known())))
    }

    fn query(&self) -> Result<HistoryQuery, ApiError> {
        let outcome = self.named("outcome", ExecutionOutcome::from_name, ExecutionOutcome::names())?;
        let failure_reason = self.named("failure_reason", FailureReason::from_name, FailureReason::names())?;
        let (start_ms, end_ms) = (self.time("start_time")?, self.time("end_time")?);
        if let (Some(start), Some(end)) = (start_ms, end_ms)
            && start > end
        {
            return Err(invalid("`start_time` must not be after `end_time`"));
        }
        Ok(HistoryQuery {
            tool_name: self.text("tool_name")?,
            toolkit_name: self.text("toolkit_name")?,
            user_id: self.text("user_id")?,
            outcome,
            failure_reason,
            start_ms,
            end_ms,
        })
    }
}

pub(super) fn ok(value: Value) -> Response {
    (StatusCode::OK, axum::Json(value)).into_response()
}

fn opt_time(ms: Option<i64>) -> Value {
    ms.map(rfc3339).unwrap_or(Value::Null)
}

fn non_empty(s: &str) -> Value {
    if s.is_empty() { Value::Null } else { Value::String(s.to_owned()) }
}

fn duration_ms(started: Option<i64>, finished: Option<i64>) -> Value {
    match (started, finished) {
        (Some(s), Some(f)) => Value::from(f.saturating_sub(s).max(0)),
        _ => Value::Null,
    }
}

/// A payload as recorded: its JSON when it is JSON, else its text; null when absent.
fn payload(text: &Option<String>) -> Value {
    match text {
        None => Value::Null,
        Some(t) => serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.clone())),
    }
}

/// One run as the list shows it (seed 002's item).
pub(crate) fn item(i: &pb::HistoryItem) -> Value {
    json!({
        "id": i.execution_id,
        "created_at": rfc3339(i.created_at_ms),
        "updated_at": rfc3339(i.updated_at_ms),
        "execution_type": i.execution_type().name(),
        "execution_status": i.status().name(),
        "tool_name": i.tool_name,
        "toolkit_name": i.toolkit_name,
        "toolkit_version": i.toolkit_version,
        "user_id": i.user_id,
        "started_at": opt_time(i.started_at_ms),
        "finished_at": opt_time(i.finished_at_ms),
    })
}

fn attempt(execution_id: &str, a: &pb::HistoryAttempt, reveal: Reveal) -> Value {
    let mut v = json!({
        "id": format!("{execution_id}:{}", a.number),
        "attempt": a.number,
        "started_at": rfc3339(a.started_at_ms),
        "finished_at": opt_time(a.finished_at_ms),
        "duration_ms": duration_ms(Some(a.started_at_ms), a.finished_at_ms),
        "success": a.success,
        "error": non_empty(&a.error_message),
        "system_error_message": non_empty(&a.system_error_message),
    });
    if reveal.outputs {
        v["output"] = payload(&a.output_json);
        v["error_detail"] = payload(&a.error_detail_json);
    }
    v
}

/// One run in full: the list's fields, timing, the timeline and the attempts,
/// and the payloads that were asked for.
pub(crate) fn detail_view(d: &pb::HistoryDetail, reveal: Reveal) -> Value {
    let item_of = d.item.clone().unwrap_or_default();
    let mut v = item(&item_of);
    let id = item_of.execution_id.as_str();
    v["surface"] = d.surface().name().into();
    v["scheduled_at"] = opt_time(d.scheduled_at_ms);
    v["duration_ms"] = duration_ms(item_of.started_at_ms, item_of.finished_at_ms);
    v["failure_reason"] = non_empty(d.failure_reason().name());
    v["error_message"] = non_empty(&d.error_message);
    v["timeline"] = d
        .timeline
        .iter()
        .map(|e| json!({"at": rfc3339(e.at_ms), "event": e.event().name(), "status": e.status().name()}))
        .collect();
    v["attempts"] = d.attempts.iter().map(|a| attempt(id, a, reveal)).collect();
    v["progress"] = crate::execution::progress(d.progress.as_ref());
    if reveal.inputs {
        v["input"] = payload(&d.input_json);
    }
    if reveal.outputs {
        v["output"] = payload(&d.output_json);
    }
    v
}

async fn list(
    State(state): State<AppState>,
    Path(p): Path<ScopePath>,
    Query(pairs): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let (params, limit, offset) = Params::paged(pairs, &FILTERS, MAX_LIMIT, DEFAULT_LIMIT)?;
    let query = params.query()?;
    let page = state.coordinator.history_list(&bearer, &p.scope(None), &query, limit, offset).await?;
    Ok(offset_page(page.items.iter().map(item).collect(), limit, offset, page.total_count))
}

/// One page of an offset-paged listing: `{items, limit, offset, page_count, total_count}`.
pub(super) fn offset_page(items: Vec<Value>, limit: u32, offset: u32, total_count: u64) -> Response {
    ok(json!({
        "page_count": items.len(),
        "items": items,
        "limit": limit,
        "offset": offset,
        "total_count": total_count,
    }))
}

async fn count(
    State(state): State<AppState>,
    Path(p): Path<ScopePath>,
    Query(pairs): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let query = Params::new(pairs, &FILTERS)?.query()?;
    let count = state.coordinator.history_count(&bearer, &p.scope(None), &query).await?;
    Ok(ok(json!({ "count": count })))
}

async fn detail(
    State(state): State<AppState>,
    Path(p): Path<ExecutionPath>,
    Query(pairs): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let params = Params::new(pairs, &["include_inputs", "include_outputs"])?;
    let reveal = Reveal { inputs: params.flag("include_inputs")?, outputs: params.flag("include_outputs")? };
    let (scope, id) = p.split();
    let found = state.coordinator.history_detail(&bearer, &scope, &id, reveal).await?;
    Ok(ok(detail_view(&found, reveal)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)], known: &[&str]) -> Result<Params, ApiError> {
        Params::new(pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(), known)
    }

    fn refusal(r: Result<impl std::fmt::Debug, ApiError>) -> String {
        r.expect_err("refused").message()
    }

    #[test]
    fn parameters_are_named_when_refused() {
        assert!(refusal(params(&[("tool", "x")], &FILTERS)).contains("`tool`"));
        assert!(refusal(params(&[("user_id", "a"), ("user_id", "b")], &FILTERS)).contains("more than once"));
        let p = |k: &str, v: &str| params(&[(k, v)], &FILTERS).expect("known").query();
        for (name, value) in [
            ("start_time", "yesterday"),
            ("end_time", "2026-08-08"),
            ("outcome", "cancelled"),
            ("failure_reason", "boom"),
            ("tool_name", ""),
            ("user_id", "a\u{1}"),
        ] {
            assert!(refusal(p(name, value)).contains(&format!("`{name}`")), "{name}={value}");
        }
        let limit = params(&[("limit", "1001")], &["limit"]).expect("known");
        assert!(refusal(limit.uint("limit", 1, MAX_LIMIT, DEFAULT_LIMIT)).contains("`limit`"));
        let flag = params(&[("include_inputs", "yes")], &["include_inputs"]).expect("known");
        assert!(refusal(flag.flag("include_inputs")).contains("`include_inputs`"));
        let reversed =
            params(&[("start_time", "2026-08-09T00:00:00Z"), ("end_time", "2026-08-08T00:00:00Z")], &FILTERS);
        assert!(refusal(reversed.expect("known").query()).contains("`start_time`"));
    }

    #[test]
    fn filters_parse() {
        let q = params(
            &[
                ("tool_name", "GetDocumentById"),
                ("outcome", "failure"),
                ("failure_reason", "owner_lost"),
                ("start_time", "2026-08-08T00:00:00Z"),
                ("end_time", "2026-08-08T02:00:00+02:00"),
            ],
            &FILTERS,
        )
        .expect("known")
        .query()
        .expect("valid");
        assert_eq!(q.tool_name.as_deref(), Some("GetDocumentById"));
        assert_eq!(q.outcome, Some(ExecutionOutcome::Failure));
        assert_eq!(q.failure_reason, Some(FailureReason::OwnerLost));
        assert_eq!(q.start_ms, Some(1_786_147_200_000));
        assert_eq!(q.end_ms, q.start_ms, "offsets are honoured");
        let none = params(&[], &FILTERS).expect("empty").query().expect("valid");
        assert_eq!(none, HistoryQuery::default());
    }

    #[test]
    fn views_carry_no_payload_unless_revealed() {
        let d = pb::HistoryDetail {
            item: Some(pb::HistoryItem { execution_id: "te_x".into(), ..Default::default() }),
            attempts: vec![pb::HistoryAttempt {
                number: 2,
                success: Some(false),
                error_message: "boom".into(),
                error_detail_json: Some(r#"{"trace":"secret"}"#.into()),
                ..Default::default()
            }],
            input_json: Some(r#"{"q":"secret"}"#.into()),
            ..Default::default()
        };
        let plain = detail_view(&d, Reveal::default());
        assert!(!plain.to_string().contains("secret"));
        assert_eq!(plain["attempts"][0]["id"], "te_x:2");
        assert_eq!(plain["attempts"][0]["error"], "boom");
        assert!(plain.get("input").is_none() && plain["attempts"][0].get("error_detail").is_none());
        let all = detail_view(&d, Reveal { inputs: true, outputs: true });
        assert_eq!(all["input"]["q"], "secret");
        assert_eq!(all["attempts"][0]["error_detail"]["trace"], "secret");
        assert_eq!(all["output"], Value::Null);
    }
}

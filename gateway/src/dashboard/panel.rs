//! The execution details panel: id, tool and toolkit version, run type, end
//! user, timing, the timeline and every attempt with its error; deadline and
//! owner-loss facts where they apply; operator cancel for keys holding the
//! `cancel` permission; and the reveal toggles. The panel never carries a
//! payload: `reveal` fetches one on a person's deliberate click (a POST with
//! the CSRF token, so no link, prefetch or history entry can ever reveal), and
//! the coordinator decides and records it. Reloading shows payloads hidden.

use super::access::{self, Viewer};
use super::filters::Filters;
use super::html::{self, esc};
use super::list::{self, prepare};
use super::{ExecutionPath, html_response, json};
use crate::app::AppState;
use crate::coordinator::history::Reveal;
use axum::Form;
use axum::extract::{OriginalUri, Path, Query, State};
use axum::response::Response;
use baton_proto::coordinator::v1::{self as pb, ExecutionStatus, FailureReason, TimelineEvent};
use baton_proto::error::{ErrorCode, WireError};
use baton_proto::names::is_execution_id;
use http::{HeaderMap, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};

fn not_found() -> WireError {
    WireError::new(ErrorCode::NotFound, "execution not found")
}

/// The run, and its operator status when the key may read it (deadlines, owner loss).
async fn load(
    state: &AppState,
    viewer: &Viewer,
    id: &str,
) -> Result<(pb::HistoryDetail, Option<pb::ExecutionView>), WireError> {
    if !is_execution_id(id) {
        return Err(not_found());
    }
    let detail = state.coordinator.history_detail(&viewer.bearer, &viewer.scope, id, Reveal::default()).await?;
    let status = if viewer.can_status {
        state.coordinator.operator_status(&viewer.bearer, &viewer.scope, id).await.ok()
    } else {
        None
    };
    Ok((detail, status))
}

pub(super) async fn page(
    State(state): State<AppState>,
    Path(path): Path<ExecutionPath>,
    Query(pairs): Query<Vec<(String, String)>>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
) -> Response {
    let project = path.project();
    let (viewer, filters) = match prepare(&state, &headers, &uri, &project, &pairs).await {
        Ok(ready) => ready,
        Err(response) => return response,
    };
    let (detail, status) = match load(&state, &viewer, &path.execution_id).await {
        Ok(found) => found,
        Err(e) => return access::failure_page(&project, &e),
    };
    let close = format!("{}/tool-executions{}", viewer.base, filters.as_ref().map(Filters::suffix).unwrap_or_default());
    let panel = panel(&viewer, &path.execution_id, &detail, status.as_ref(), &close);
    match list::with_panel(&state, &viewer, &path, filters, &panel).await {
        Ok(body) => {
            let title = detail.item.as_ref().map(|i| i.tool_name.as_str()).unwrap_or("Execution");
            html_response(StatusCode::OK, html::page(title, &viewer.header(), &body))
        }
        Err(e) => access::failure_page(&project, &e),
    }
}

fn panel(viewer: &Viewer, id: &str, d: &pb::HistoryDetail, status: Option<&pb::ExecutionView>, close: &str) -> String {
    let item = d.item.clone().unwrap_or_default();
    let base = format!("{}/tool-executions/{}", viewer.base, html::url_part(id));
    let toggles = if viewer.admin {
        r#"<div class="toggles">
<button type="button" class="toggle" data-reveal="inputs" aria-pressed="false">Show inputs</button>
<button type="button" class="toggle" data-reveal="outputs" aria-pressed="false">Show outputs</button>
</div>
<p class="help">Payloads stay hidden until you turn a toggle on; each reveal is recorded. Turning a toggle on never changes the address, so a shared link opens with payloads hidden.</p>
<noscript><p class="help">Revealing payloads needs JavaScript.</p></noscript>"#
    } else {
        r#"<div class="toggles">
<button type="button" class="toggle" data-reveal="inputs" aria-pressed="false" disabled aria-describedby="reveal-why">Show inputs</button>
<button type="button" class="toggle" data-reveal="outputs" aria-pressed="false" disabled aria-describedby="reveal-why">Show outputs</button>
</div>
<p id="reveal-why" class="help why">Showing inputs and outputs takes a project admin key. Ask a project admin, or read the attempt errors above: they stay visible to every reader.</p>"#
    };
    format!(
        r#"<aside class="panel" id="panel" aria-labelledby="panel-title" data-panel-url="{base}/panel" data-reveal-url="{base}/reveal" data-status="{status_name}">
<div class="panel-head"><h2 id="panel-title">{tool}</h2><a class="close" href="{close}">Close<span class="visually-hidden"> the details</span></a></div>
<div id="panel-live">{live}</div>
<p id="cancel-outcome" class="notice" role="status" aria-live="polite" hidden></p>
<section class="payloads" aria-labelledby="payloads-title">
<h3 id="payloads-title">Inputs and outputs</h3>
{toggles}
<div class="warning" id="reveal-warning" role="alert" hidden><strong>Sensitive data is visible.</strong> Recorded tool payloads can hold credentials and personal data; anyone who can see this screen or a recording of it can read them.</div>
<div class="payload" data-part="inputs" hidden></div>
<div class="payload" data-part="outputs" hidden></div>
</section>
</aside>"#,
        base = esc(&base),
        status_name = item.status().name(),
        tool = esc(&item.tool_name),
        close = esc(close),
        live = live_part(viewer, id, d, status),
    )
}

fn fact(term: &str, value: &str) -> String {
    format!("<dt>{term}</dt><dd>{value}</dd>")
}

fn or_dash(s: &str) -> String {
    if s.is_empty() { r#"<span class="none">—</span>"#.to_owned() } else { esc(s) }
}

/// What the panel re-renders while the run changes.
fn live_part(viewer: &Viewer, id: &str, d: &pb::HistoryDetail, status: Option<&pb::ExecutionView>) -> String {
    let now = baton_proto::clock::now_ms();
    let item = d.item.clone().unwrap_or_default();
    let duration = match (item.started_at_ms, item.finished_at_ms) {
        (Some(s), Some(f)) => html::duration(f - s),
        (Some(s), None) => format!("{} so far", html::duration(now - s)),
        _ => "not started".to_owned(),
    };
    let toolkit = if item.toolkit_name.is_empty() {
        or_dash("")
    } else {
        format!("{} <span class=\"sub\">version</span> {}", esc(&item.toolkit_name), or_dash(&item.toolkit_version))
    };
    let run_type = match item.execution_type() {
        pb::ExecutionType::Scheduled => "Scheduled",
        _ => "Immediate",
    };
    let surface = match d.surface() {
        pb::Surface::Rest => "REST API",
        pb::Surface::McpNative => "MCP (task)",
        pb::Surface::McpCompat => "MCP (compatibility tools)",
        pb::Surface::Unspecified => "—",
    };
    let facts = [
        fact(
            "Execution ID",
            &format!(r#"<code class="exec-id">{id}</code> <button type="button" class="copy" data-copy="{id}">Copy<span class="visually-hidden"> the execution ID</span></button>"#, id = esc(id)),
        ),
        fact("Tool", &esc(&item.tool_name)),
        fact("Toolkit", &toolkit),
        fact("Run type", run_type),
        fact("End user", &or_dash(&item.user_id)),
        fact("Started through", surface),
        fact("Created", &html::time(item.created_at_ms, now)),
        d.scheduled_at_ms.map(|at| fact("Scheduled for", &html::time(at, now))).unwrap_or_default(),
        fact("Started", &html::opt_time(item.started_at_ms, now)),
        fact("Finished", &html::opt_time(item.finished_at_ms, now)),
        fact("Duration", &duration),
    ]
    .concat();
    format!(
        r#"<div class="status-line">{badge}</div>
{problem}
<dl class="facts">{facts}</dl>
{deadlines}
{cancel}
<h3>Attempts</h3>
{attempts}
<h3>Timeline</h3>
{timeline}"#,
        badge = html::status_badge(item.status()),
        problem = problem(d),
        deadlines = status.map(|s| deadlines(s, d.failure_reason(), now)).unwrap_or_default(),
        cancel = cancel_form(viewer, id, item.status()),
        attempts = attempts(d, now),
        timeline = timeline(d, item.created_at_ms, now),
    )
}

/// Why a run failed, in words, with owner-loss and deadline explained.
fn problem(d: &pb::HistoryDetail) -> String {
    let reason = d.failure_reason();
    // A run that completed after failed attempts keeps their errors in the attempt list.
    let failed = d.item.as_ref().is_some_and(|i| i.status() == ExecutionStatus::Failed);
    if !failed || (reason == FailureReason::Unspecified && d.error_message.is_empty()) {
        return String::new();
    }
    let why = match reason {
        FailureReason::OwnerLost => {
            "Owner lost: the worker running this attempt stopped reporting and did not come back before the \
             owner-loss deadline. Baton failed the run rather than risk running the tool twice."
        }
        FailureReason::DeadlineExceeded => "Deadline exceeded: the run did not finish before its execution deadline.",
        FailureReason::ToolError => "The tool reported an error it did not mark as retryable, or ran out of retries.",
        FailureReason::UnsupportedInteraction => "The tool asked for an interaction the caller could not provide.",
        FailureReason::InvocationRefused => "The worker refused to invoke the tool.",
        FailureReason::ProtocolError => "The tool's server failed the call with a protocol error instead of a result.",
        FailureReason::Unspecified => "",
    };
    let message = if d.error_message.is_empty() {
        String::new()
    } else {
        format!(r#"<p class="error-text">{}</p>"#, esc(&d.error_message))
    };
    format!(r#"<div class="problem"><p><strong>{}</strong></p>{message}</div>"#, esc(why))
}

/// The deadline and the owner-loss check while they can still matter (and the
/// deadline of a run that missed it).
fn deadlines(s: &pb::ExecutionView, reason: FailureReason, now: i64) -> String {
    let terminal = s.status().is_terminal();
    if terminal && reason != FailureReason::DeadlineExceeded {
        return String::new();
    }
    let mut out = vec![fact("Execution deadline", &html::time(s.execution_deadline_ms, now))];
    if let Some(at) = s.owner_loss_detection_at_ms.filter(|_| !terminal) {
        out.push(fact(
            "Owner-loss check",
            &format!(
                "{} <span class=\"sub\">If the worker stops reporting, the run fails as owner lost then.</span>",
                html::time(at, now)
            ),
        ));
    }
    if s.cancel_state() == pb::CancelState::Requested && !terminal {
        out.push(fact("Cancel", "requested; waiting for the tool to stop"));
    }
    format!(r#"<dl class="facts deadlines">{}</dl>"#, out.concat())
}

fn cancel_form(viewer: &Viewer, id: &str, status: ExecutionStatus) -> String {
    if !viewer.can_cancel || status.is_terminal() {
        return String::new();
    }
    let action = format!("{}/tool-executions/{}/cancel", viewer.base, html::url_part(id));
    format!(
        r#"<details class="cancel"><summary>Cancel this execution…</summary>
<p>The tool is asked to stop. What Baton can prove about the stop is shown here once it answers.</p>
<form method="post" action="{action}" class="cancel-form"><input type="hidden" name="csrf" value="{csrf}"><button type="submit" class="danger">Yes, cancel it</button></form>
</details>"#,
        action = esc(&action),
        csrf = esc(&viewer.csrf),
    )
}

fn attempts(d: &pb::HistoryDetail, now: i64) -> String {
    if d.attempts.is_empty() {
        return r#"<p class="none">No attempt has started yet.</p>"#.to_owned();
    }
    let items: String = d
        .attempts
        .iter()
        .map(|a| {
            let (class, label) = match a.success {
                Some(true) => ("completed", "Succeeded"),
                // Stopped because someone cancelled the run: the tool did not fail.
                Some(false) if a.cancelled => ("stopped", "Stopped by cancel"),
                Some(false) => ("failed", "Failed"),
                None => ("working", "Running"),
            };
            let duration = a.finished_at_ms.map(|f| html::duration(f - a.started_at_ms)).unwrap_or_else(|| "running".into());
            let error = if a.error_message.is_empty() {
                String::new()
            } else {
                format!(r#"<p class="error-text"><span class="sub">Error:</span> {}</p>"#, esc(&a.error_message))
            };
            // A stop the caller asked for is no error: said plainly, not in red.
            let tone = if a.cancelled { "sub" } else { "error-text" };
            let system = if a.system_error_message.is_empty() {
                String::new()
            } else {
                format!(r#"<p class="{tone}"><span class="sub">Baton:</span> {}</p>"#, esc(&a.system_error_message))
            };
            format!(
                r#"<li class="attempt"><div><strong>Attempt {n}</strong> <span class="status status-{class}">{label}</span> <span class="sub">{duration}</span></div><div class="sub">started {started}</div>{error}{system}</li>"#,
                n = a.number,
                started = html::time(a.started_at_ms, now),
            )
        })
        .collect();
    format!(r#"<ol class="attempts">{items}</ol>"#)
}

fn event_label(e: TimelineEvent) -> &'static str {
    match e {
        TimelineEvent::Created => "Created",
        TimelineEvent::Claimed => "Claimed by a worker; an attempt starts",
        TimelineEvent::Settled => "The worker reported the attempt's result",
        TimelineEvent::CancelRequested => "Cancel requested",
        TimelineEvent::LeaseLapsed => "The worker stopped reporting (lease lapsed)",
        TimelineEvent::OwnerLost => "Owner lost",
        TimelineEvent::DeadlineExceeded => "Deadline exceeded",
        TimelineEvent::Refused => "The worker refused the attempt",
        TimelineEvent::Undelivered => "The assignment provably never reached the worker",
        TimelineEvent::RemoteTaskRecorded => "Remote task recorded",
        TimelineEvent::InputRequested => "Input requested",
        TimelineEvent::InputAnswered => "Input answered",
        TimelineEvent::Unspecified => "Event",
    }
}

fn timeline(d: &pb::HistoryDetail, created: i64, now: i64) -> String {
    if d.timeline.is_empty() {
        return r#"<p class="none">No events recorded.</p>"#.to_owned();
    }
    let items: String = d
        .timeline
        .iter()
        .map(|e| {
            let warn = matches!(
                e.event(),
                TimelineEvent::LeaseLapsed | TimelineEvent::OwnerLost | TimelineEvent::DeadlineExceeded
            );
            format!(
                r#"<li{class}><span class="event">{label}</span> <span class="sub">→ {status} · +{offset}</span><div class="sub">{at}</div></li>"#,
                class = if warn { r#" class="warn""# } else { "" },
                label = event_label(e.event()),
                status = e.status().name().replace('_', " "),
                offset = html::duration(e.at_ms - created),
                at = html::time(e.at_ms, now),
            )
        })
        .collect();
    format!(r#"<ol class="timeline">{items}</ol>"#)
}

/// The script's poll of an open panel.
pub(super) async fn live(
    State(state): State<AppState>,
    Path(path): Path<ExecutionPath>,
    headers: HeaderMap,
) -> Response {
    let viewer = match access::viewer(&state, &headers, &path.project(), None).await {
        Ok(v) => v,
        Err(denied) => return denied.json(),
    };
    match load(&state, &viewer, &path.execution_id).await {
        Ok((d, status)) => {
            let s = d.item.as_ref().map(|i| i.status()).unwrap_or_default();
            // What makes the panel worth redrawing (times alone tick in the script).
            let cancel = status.as_ref().map(|v| v.cancel_state().name()).unwrap_or_default();
            let version = format!("{}:{}:{}:{cancel}", s.name(), d.timeline.len(), d.attempts.len());
            let html = live_part(&viewer, &path.execution_id, &d, status.as_ref());
            json(
                StatusCode::OK,
                json!({"status": s.name(), "terminal": s.is_terminal(), "version": version, "html": html}),
            )
        }
        Err(e) => access::failure_json(&e),
    }
}

#[derive(Deserialize)]
pub(super) struct RevealForm {
    csrf: String,
    part: String,
}

/// A payload as recorded: JSON when it is JSON, else text; null when absent.
fn recorded(text: &Option<String>) -> Value {
    text.as_deref()
        .map(|t| serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_owned())))
        .unwrap_or(Value::Null)
}

/// Fetches one part's payloads for the script; the coordinator checks the
/// admin role and records the read.
pub(super) async fn reveal(
    State(state): State<AppState>,
    Path(path): Path<ExecutionPath>,
    headers: HeaderMap,
    Form(form): Form<RevealForm>,
) -> Response {
    let viewer = match access::viewer(&state, &headers, &path.project(), Some(&form.csrf)).await {
        Ok(v) => v,
        Err(denied) => return denied.json(),
    };
    let reveal = match form.part.as_str() {
        "inputs" => Reveal { inputs: true, outputs: false },
        "outputs" => Reveal { inputs: false, outputs: true },
        _ => {
            return json(
                StatusCode::BAD_REQUEST,
                json!({"error": {"code": "invalid_request", "message": "part must be inputs or outputs"}}),
            );
        }
    };
    if !is_execution_id(&path.execution_id) {
        return access::failure_json(&not_found());
    }
    let d = match state.coordinator.history_detail(&viewer.bearer, &viewer.scope, &path.execution_id, reveal).await {
        Ok(d) => d,
        Err(e) if e.code == ErrorCode::PermissionDenied => {
            let message = "Showing inputs and outputs takes a project admin key.";
            return json(StatusCode::FORBIDDEN, json!({"error": {"code": "permission_denied", "message": message}}));
        }
        Err(e) => return access::failure_json(&e),
    };
    let body = if reveal.inputs {
        json!({"part": "inputs", "input": recorded(&d.input_json)})
    } else {
        let attempts: Vec<Value> = d
            .attempts
            .iter()
            .map(|a| json!({"attempt": a.number, "output": recorded(&a.output_json), "error_detail": recorded(&a.error_detail_json)}))
            .collect();
        json!({"part": "outputs", "output": recorded(&d.output_json), "attempts": attempts})
    };
    json(StatusCode::OK, body)
}

#[derive(Deserialize)]
pub(super) struct CancelForm {
    csrf: String,
}

/// What a cancel's outcome means, for a person.
fn outcome_text(outcome: pb::CancelOutcome) -> &'static str {
    match outcome {
        pb::CancelOutcome::Accepted => "Cancel accepted: the run is stopping.",
        pb::CancelOutcome::Unsupported => "This run cannot be cancelled; it goes on.",
        pb::CancelOutcome::AlreadyTerminal => "Nothing to cancel: the run had already finished.",
        pb::CancelOutcome::StopDeliveryUnknown => {
            "Cancel recorded, but Baton could not confirm that the stop reached the worker; the tool may still be \
             running its current attempt."
        }
        pb::CancelOutcome::StopAlreadyRequested => "A stop was already requested for this run.",
        pb::CancelOutcome::Unspecified => "The cancel was sent; its outcome is unknown.",
    }
}

/// Operator cancel: the coordinator checks the `cancel` permission and answers
/// the provable outcome, shown as it came.
pub(super) async fn cancel(
    State(state): State<AppState>,
    Path(path): Path<ExecutionPath>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    Form(form): Form<CancelForm>,
) -> Response {
    let project = path.project();
    let wants_json =
        headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("application/json"));
    let viewer = match access::viewer(&state, &headers, &project, Some(&form.csrf)).await {
        Ok(v) => v,
        Err(denied) if wants_json => return denied.json(),
        Err(denied) => return denied.page(&project, &list::here(&uri), access::is_tls(&headers, &uri)),
    };
    let answer = if is_execution_id(&path.execution_id) {
        state.coordinator.operator_cancel(&viewer.bearer, &viewer.scope, &path.execution_id).await
    } else {
        Err(not_found())
    };
    let answer = match answer {
        Ok(a) => a,
        Err(e) if e.code == ErrorCode::PermissionDenied => {
            let message = "Cancelling takes a key with the operator cancel permission.";
            if wants_json {
                return json(
                    StatusCode::FORBIDDEN,
                    json!({"error": {"code": "permission_denied", "message": message}}),
                );
            }
            return access::message_page(&project, StatusCode::FORBIDDEN, "Your key may not cancel", message);
        }
        Err(e) if wants_json => return access::failure_json(&e),
        Err(e) => return access::failure_page(&project, &e),
    };
    let outcome = answer.outcome();
    if wants_json {
        return json(StatusCode::OK, json!({"outcome": outcome.name(), "message": outcome_text(outcome)}));
    }
    let back = format!("{}/tool-executions/{}", viewer.base, html::url_part(&path.execution_id));
    let body = format!(
        r#"<section class="message" aria-labelledby="message-title"><h1 id="message-title">Cancel: {}</h1><p>{}</p><p><a class="button" href="{}">Back to the execution</a></p></section>"#,
        esc(&outcome.name().replace('_', " ")),
        esc(outcome_text(outcome)),
        esc(&back)
    );
    html_response(StatusCode::OK, html::page("Cancel", &viewer.header(), &body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::{Bearer, Scope};

    fn viewer(can_cancel: bool) -> Viewer {
        Viewer {
            bearer: Bearer("k".into()),
            scope: Scope { org_id: "o".into(), project_id: "p".into(), gateway_id: None },
            base: "/dashboard/orgs/o/projects/p".into(),
            admin: false,
            can_cancel,
            can_status: false,
            csrf: "tok".into(),
            person: false,
        }
    }

    fn hostile(status: ExecutionStatus) -> pb::HistoryDetail {
        pb::HistoryDetail {
            item: Some(pb::HistoryItem {
                execution_id: "te_x".into(),
                status: status as i32,
                tool_name: "<script>alert(1)</script>".into(),
                user_id: r#""><img src=x onerror=alert(2)>"#.into(),
                started_at_ms: Some(1),
                finished_at_ms: Some(2),
                ..Default::default()
            }),
            failure_reason: FailureReason::OwnerLost as i32,
            error_message: "<b>boom</b>".into(),
            attempts: vec![pb::HistoryAttempt {
                number: 1,
                success: Some(false),
                error_message: "<i>bad</i>".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn whatever_tools_and_users_send_is_shown_as_text() {
        let d = hostile(ExecutionStatus::Failed);
        let html = panel(&viewer(true), "te_x", &d, None, "/close");
        for raw in ["<script>", "<img", "<b>boom", "<i>bad"] {
            assert!(!html.contains(raw), "{raw} was not escaped");
        }
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("Owner lost"), "owner loss is explained");
        assert!(!html.contains("cancel-form"), "no cancel for a finished run");
    }

    #[test]
    fn an_attempt_stopped_by_a_cancel_is_not_labelled_failed() {
        let mut d = hostile(ExecutionStatus::Cancelled);
        d.attempts[0].error_message.clear();
        d.attempts[0].cancelled = true;
        let html = attempts(&d, 3);
        assert!(html.contains("Stopped by cancel") && !html.contains(">Failed<"), "{html}");
        d.attempts[0].cancelled = false;
        assert!(attempts(&d, 3).contains(">Failed<"));
    }

    #[test]
    fn cancel_is_offered_to_holders_of_the_permission_while_the_run_lives() {
        let d = hostile(ExecutionStatus::Working);
        assert!(live_part(&viewer(true), "te_x", &d, None).contains(r#"name="csrf" value="tok""#));
        assert!(!live_part(&viewer(false), "te_x", &d, None).contains("cancel-form"));
        let members = panel(&viewer(false), "te_x", &d, None, "/close");
        assert_eq!(members.matches("disabled").count(), 2, "both toggles are off for a member");
        assert!(members.contains("takes a project admin key"));
    }
}

//! `baton.coordinator.v1.History`: the execution history, over the engine's
//! history use cases. Wire enums meet the engine's here, enum to enum; stored
//! names become wire enums only through `baton_proto::names`.

use super::authorization;
use super::convert::{failure_reason, status, timeline_event};
use super::status::to_status;
use crate::domain::FailureReason;
use crate::engine::history::{AttemptView, HistoryDetail, HistoryQuery, Reveal, RunOutcome};
use crate::engine::{Engine, Scope};
use crate::store::{EventRecord, HistoryRow};
use baton_proto::coordinator::v1::{self as pb, history_server::History};
use std::sync::Arc;
use tonic::{Request, Response, Status};

pub(crate) struct HistoryService {
    pub(crate) engine: Arc<Engine>,
}

type Reply<T> = Result<Response<T>, Status>;

fn outcome(o: pb::ExecutionOutcome) -> Option<RunOutcome> {
    match o {
        pb::ExecutionOutcome::Unspecified => None,
        pb::ExecutionOutcome::Success => Some(RunOutcome::Success),
        pb::ExecutionOutcome::Failure => Some(RunOutcome::Failure),
    }
}

/// `None` for unspecified.
fn failure_reason_from_wire(r: pb::FailureReason) -> Option<FailureReason> {
    FailureReason::ALL.into_iter().find(|d| failure_reason(*d) == r)
}

/// The engine's query for a filter. A value this release does not know (a
/// newer gateway's) is refused: read as unspecified, it would narrow nothing
/// and answer more runs than were asked for.
fn query(f: Option<&pb::HistoryFilter>) -> Result<HistoryQuery, Status> {
    let Some(f) = f else { return Ok(HistoryQuery::default()) };
    let unknown = |field: &str, raw: i32| {
        to_status(crate::engine::Error::Invalid(format!("filter.{field} {raw} is unknown to this coordinator")))
    };
    let outcome_filter = pb::ExecutionOutcome::try_from(f.outcome).map_err(|_| unknown("outcome", f.outcome))?;
    let reason_filter =
        pb::FailureReason::try_from(f.failure_reason).map_err(|_| unknown("failure_reason", f.failure_reason))?;
    let text = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    Ok(HistoryQuery {
        tool_name: text(&f.tool_name),
        toolkit_name: text(&f.toolkit_name),
        user_id: text(&f.user_id),
        outcome: outcome(outcome_filter),
        failure_reason: failure_reason_from_wire(reason_filter),
        start_ms: f.start_time_ms,
        end_ms: f.end_time_ms,
    })
}

fn item(r: &HistoryRow) -> pb::HistoryItem {
    pb::HistoryItem {
        execution_id: r.id.to_string(),
        status: status(r.status) as i32,
        execution_type: pb::ExecutionType::from_name(&r.execution_type).unwrap_or_default() as i32,
        tool_name: r.tool_name.clone(),
        toolkit_name: r.toolkit_name.clone(),
        toolkit_version: r.toolkit_version.clone(),
        user_id: r.user_id.clone(),
        created_at_ms: r.created_at,
        updated_at_ms: r.updated_at,
        started_at_ms: r.started_at,
        finished_at_ms: r.finished_at,
    }
}

fn timeline_entry(e: &EventRecord) -> pb::TimelineEntry {
    pb::TimelineEntry {
        at_ms: e.at,
        event: e.kind.map_or(pb::TimelineEvent::Unspecified, timeline_event) as i32,
        status: e.status.map_or(pb::ExecutionStatus::Unspecified, status) as i32,
    }
}

fn attempt(a: &AttemptView) -> pb::HistoryAttempt {
    pb::HistoryAttempt {
        number: a.number,
        started_at_ms: a.started_at,
        finished_at_ms: a.finished_at,
        success: a.success,
        cancelled: a.cancelled,
        error_message: a.error.clone().unwrap_or_default(),
        system_error_message: a.system_error.clone().unwrap_or_default(),
        output_json: a.output.clone(),
        error_detail_json: a.error_detail.clone(),
    }
}

fn detail(d: HistoryDetail) -> pb::HistoryDetail {
    let r = &d.record;
    let row = HistoryRow {
        id: r.id.clone(),
        status: r.status(),
        execution_type: r.execution_type.clone(),
        tool_name: r.tool_name.clone(),
        toolkit_name: r.toolkit_name.clone(),
        toolkit_version: r.toolkit_version.clone(),
        user_id: r.user_id.clone(),
        created_at: r.created_at,
        updated_at: r.updated_at,
        started_at: r.started_at,
        finished_at: r.finished_at,
    };
    pb::HistoryDetail {
        item: Some(item(&row)),
        surface: pb::Surface::from_name(&r.surface).unwrap_or(pb::Surface::Rest) as i32,
        scheduled_at_ms: r.scheduled_at,
        failure_reason: r.failure_reason().map(failure_reason).unwrap_or_default() as i32,
        error_message: r.error_message.clone().unwrap_or_default(),
        timeline: d.timeline.iter().map(timeline_entry).collect(),
        attempts: d.attempts.iter().map(attempt).collect(),
        input_json: d.input,
        output_json: d.output,
        progress: super::convert::progress(r),
    }
}

fn scope<'a>(org_id: &'a str, project_id: &'a str) -> Scope<'a> {
    Scope { org_id, project_id }
}

#[tonic::async_trait]
impl History for HistoryService {
    async fn list_history(&self, req: Request<pb::ListHistoryRequest>) -> Reply<pb::ListHistoryResponse> {
        let r = req.get_ref();
        let page = self
            .engine
            .history_list(
                authorization(&req),
                scope(&r.org_id, &r.project_id),
                &query(r.filter.as_ref())?,
                r.limit,
                r.offset,
            )
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListHistoryResponse {
            items: page.items.iter().map(item).collect(),
            total_count: page.total,
        }))
    }

    async fn count_history(&self, req: Request<pb::CountHistoryRequest>) -> Reply<pb::CountHistoryResponse> {
        let r = req.get_ref();
        let count = self
            .engine
            .history_count(authorization(&req), scope(&r.org_id, &r.project_id), &query(r.filter.as_ref())?)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::CountHistoryResponse { count }))
    }

    async fn get_history(&self, req: Request<pb::GetHistoryRequest>) -> Reply<pb::HistoryDetail> {
        let r = req.get_ref();
        let reveal = Reveal { inputs: r.include_inputs, outputs: r.include_outputs };
        let found = self
            .engine
            .history_detail(authorization(&req), scope(&r.org_id, &r.project_id), &r.execution_id, reveal)
            .await
            .map_err(to_status)?;
        Ok(Response::new(detail(found)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Event, Outcome};

    /// The domain spells failure reasons for the database; the wire for REST.
    #[test]
    fn domain_and_wire_spell_failure_reasons_alike() {
        for r in FailureReason::ALL {
            assert_eq!(failure_reason(r).name(), r.as_str());
            assert_eq!(failure_reason_from_wire(failure_reason(r)), Some(r));
        }
        assert_eq!(failure_reason_from_wire(pb::FailureReason::Unspecified), None);
        assert_eq!(pb::FailureReason::ALL.len(), FailureReason::ALL.len());
    }

    /// Every event the log records has a timeline name (heartbeats are not logged).
    #[test]
    fn every_logged_event_has_a_timeline_name() {
        let w = || "w".to_owned();
        let logged = [
            Event::Claim { worker_id: w(), lease_until: 0 },
            Event::Settle { worker_id: w(), attempt: 1, outcome: Outcome::Success },
            Event::RequestCancel,
            Event::LeaseLapsed { detect_at: 0 },
            Event::OwnerLossDue,
            Event::DeadlinePassed,
            Event::Refuse,
            Event::Undelivered { worker_id: w(), attempt: 1 },
            Event::RemoteTaskRecorded { worker_id: w(), attempt: 1, deadline: None },
            Event::InputRequested { worker_id: w(), attempt: 1 },
            Event::InputAnswered { all_answered: true },
        ];
        // A new event fails to compile here until it is added to `logged`.
        for e in &logged {
            match e {
                Event::Claim { .. }
                | Event::Settle { .. }
                | Event::RequestCancel
                | Event::LeaseLapsed { .. }
                | Event::OwnerLossDue
                | Event::DeadlinePassed
                | Event::Refuse
                | Event::Undelivered { .. }
                | Event::RemoteTaskRecorded { .. }
                | Event::InputRequested { .. }
                | Event::InputAnswered { .. } => {}
                Event::Heartbeat { .. } => unreachable!("heartbeats are not logged"),
            }
        }
        let mut names: Vec<&str> = logged.iter().map(Event::name).collect();
        // Written by the store when it creates the row.
        names.push("created");
        for name in &names {
            // Read back as the domain's kind, sent as the wire's event of the same name.
            let kind = crate::domain::EventKind::parse(name);
            assert_eq!(kind.map(|k| timeline_event(k).name()), Some(*name), "{name}");
        }
        assert_eq!(pb::TimelineEvent::ALL.len(), names.len());
        assert_eq!(crate::domain::EventKind::ALL.len(), names.len());
    }

    #[test]
    fn outcomes_map_and_unspecified_filters_nothing() {
        assert_eq!(outcome(pb::ExecutionOutcome::Unspecified), None);
        assert_eq!(outcome(pb::ExecutionOutcome::Success), Some(RunOutcome::Success));
        assert_eq!(outcome(pb::ExecutionOutcome::Failure), Some(RunOutcome::Failure));
        assert_eq!(query(None).ok(), Some(HistoryQuery::default()));
    }

    /// A newer gateway's filter value is refused as a bad request, never
    /// read as "no filter" nor answered `internal`.
    #[test]
    fn an_unknown_filter_value_is_a_clear_refusal() {
        for filter in [
            pb::HistoryFilter { failure_reason: 99, ..Default::default() },
            pb::HistoryFilter { outcome: 42, ..Default::default() },
        ] {
            let refusal = query(Some(&filter)).expect_err("refused");
            assert_eq!(refusal.code(), tonic::Code::InvalidArgument);
            assert!(refusal.message().contains("unknown to this coordinator"), "{}", refusal.message());
        }
        let known = pb::HistoryFilter { failure_reason: pb::FailureReason::OwnerLost as i32, ..Default::default() };
        assert_eq!(query(Some(&known)).ok().and_then(|q| q.failure_reason), Some(FailureReason::OwnerLost));
    }
}

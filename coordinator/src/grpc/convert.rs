//! Engine and record types -> wire, and back: the only place the coordinator's
//! own enums meet the wire enums. Text goes through `baton_proto::names`, the
//! one spelling of every wire enum; the conversions here are enum to enum.

use crate::authz::{Principal, Role};
use crate::domain::{Background, EventKind, FailureReason, Status, StopReason, Surface};
use crate::engine::lifecycle::CancelOutcome;
use crate::engine::messages::{DeclineReason, MessageKind};
use crate::people::PersonRole;
use crate::store::{ExecutionRecord, ToolRecord};
use baton_proto::coordinator::v1 as pb;
use baton_proto::worker::v1 as wpb;

/// The surface a start names; an unspecified one is REST.
pub(crate) fn surface(s: pb::Surface) -> Surface {
    match s {
        pb::Surface::Unspecified | pb::Surface::Rest => Surface::Rest,
        pb::Surface::McpNative => Surface::McpNative,
        pb::Surface::McpCompat => Surface::McpCompat,
    }
}

pub(crate) fn status(s: Status) -> pb::ExecutionStatus {
    match s {
        Status::Pending => pb::ExecutionStatus::Pending,
        Status::Working => pb::ExecutionStatus::Working,
        Status::InputRequired => pb::ExecutionStatus::InputRequired,
        Status::Completed => pb::ExecutionStatus::Completed,
        Status::Failed => pb::ExecutionStatus::Failed,
        Status::Cancelled => pb::ExecutionStatus::Cancelled,
    }
}

/// The status a long poll waits to change from; `None` for unspecified.
pub(crate) fn known_status(s: pb::ExecutionStatus) -> Option<Status> {
    Status::ALL.into_iter().find(|d| status(*d) == s)
}

pub(crate) fn stop_reason(r: StopReason) -> wpb::StopReason {
    match r {
        StopReason::Cancelled => wpb::StopReason::Cancelled,
        StopReason::DeadlineExceeded => wpb::StopReason::DeadlineExceeded,
        StopReason::OwnerLost => wpb::StopReason::OwnerLost,
    }
}

/// `None` for unspecified.
pub(crate) fn stop_reason_from_wire(r: wpb::StopReason) -> Option<StopReason> {
    [StopReason::Cancelled, StopReason::DeadlineExceeded, StopReason::OwnerLost]
        .into_iter()
        .find(|d| stop_reason(*d) == r)
}

pub(crate) fn cancel_outcome(o: CancelOutcome) -> pb::CancelOutcome {
    match o {
        CancelOutcome::Accepted => pb::CancelOutcome::Accepted,
        CancelOutcome::Unsupported => pb::CancelOutcome::Unsupported,
        CancelOutcome::AlreadyTerminal => pb::CancelOutcome::AlreadyTerminal,
        CancelOutcome::StopDeliveryUnknown => pb::CancelOutcome::StopDeliveryUnknown,
        CancelOutcome::StopAlreadyRequested => pb::CancelOutcome::StopAlreadyRequested,
    }
}

pub(crate) fn message_kind(k: MessageKind) -> wpb::MessageKind {
    match k {
        MessageKind::Settlement => wpb::MessageKind::Settlement,
        MessageKind::Heartbeat => wpb::MessageKind::Heartbeat,
        MessageKind::RemoteTask => wpb::MessageKind::RemoteTask,
        MessageKind::InputRequested => wpb::MessageKind::InputRequested,
        MessageKind::InputDelivered => wpb::MessageKind::InputDelivered,
    }
}

pub(crate) fn failure_reason(r: FailureReason) -> pb::FailureReason {
    match r {
        FailureReason::ToolError => pb::FailureReason::ToolError,
        FailureReason::DeadlineExceeded => pb::FailureReason::DeadlineExceeded,
        FailureReason::OwnerLost => pb::FailureReason::OwnerLost,
        FailureReason::UnsupportedInteraction => pb::FailureReason::UnsupportedInteraction,
        FailureReason::InvocationRefused => pb::FailureReason::InvocationRefused,
        FailureReason::ProtocolError => pb::FailureReason::ProtocolError,
    }
}

pub(crate) fn timeline_event(k: EventKind) -> pb::TimelineEvent {
    match k {
        EventKind::Created => pb::TimelineEvent::Created,
        EventKind::Claimed => pb::TimelineEvent::Claimed,
        EventKind::Settled => pb::TimelineEvent::Settled,
        EventKind::CancelRequested => pb::TimelineEvent::CancelRequested,
        EventKind::LeaseLapsed => pb::TimelineEvent::LeaseLapsed,
        EventKind::OwnerLost => pb::TimelineEvent::OwnerLost,
        EventKind::DeadlineExceeded => pb::TimelineEvent::DeadlineExceeded,
        EventKind::Refused => pb::TimelineEvent::Refused,
        EventKind::Undelivered => pb::TimelineEvent::Undelivered,
        EventKind::RemoteTaskRecorded => pb::TimelineEvent::RemoteTaskRecorded,
        EventKind::InputRequested => pb::TimelineEvent::InputRequested,
        EventKind::InputAnswered => pb::TimelineEvent::InputAnswered,
    }
}

pub(crate) fn background(b: Background) -> wpb::BackgroundPolicy {
    match b {
        Background::Forbidden => wpb::BackgroundPolicy::Forbidden,
        Background::Optional => wpb::BackgroundPolicy::Optional,
        Background::Required => wpb::BackgroundPolicy::Required,
    }
}

/// A worker's reason, read from either field (`AssignmentDeclined::read_reason`).
pub(crate) fn decline_reason(r: wpb::DeclineReason) -> DeclineReason {
    match r {
        wpb::DeclineReason::AtCapacity => DeclineReason::AtCapacity,
        wpb::DeclineReason::Draining => DeclineReason::Draining,
        wpb::DeclineReason::Unspecified => DeclineReason::Unknown,
    }
}

pub(crate) fn role(r: Role) -> pb::Role {
    match r {
        Role::Admin => pb::Role::Admin,
        Role::Member => pb::Role::Member,
        Role::ReadOnly => pb::Role::ReadOnly,
    }
}

pub(crate) fn person_role(r: PersonRole) -> pb::Role {
    match r {
        PersonRole::Admin => pb::Role::Admin,
        PersonRole::Operator => pb::Role::Operator,
        PersonRole::Member => pb::Role::Member,
        PersonRole::ReadOnly => pb::Role::ReadOnly,
    }
}

pub(crate) fn principal_kind(p: &Principal) -> pb::PrincipalKind {
    match p {
        Principal::EndUser { .. } => pb::PrincipalKind::EndUser,
        Principal::ApiKey { .. } => pb::PrincipalKind::ApiKey,
        Principal::Worker { .. } => pb::PrincipalKind::Worker,
    }
}

/// An input action the engine relays (as stored); anything unreadable
/// cancels, as an answer nobody can read must not be taken for consent.
pub(crate) fn input_action(name: &str) -> wpb::InputAction {
    wpb::InputAction::from_name(name).unwrap_or(wpb::InputAction::Cancel)
}

pub(crate) fn view(r: &ExecutionRecord) -> pb::ExecutionView {
    let cancel_state = if r.state.cancel_requested { pb::CancelState::Requested } else { pb::CancelState::None };
    let mut view = pb::ExecutionView {
        execution_id: r.id.to_string(),
        status: status(r.status()) as i32,
        org_id: r.org_id.clone(),
        project_id: r.project_id.clone(),
        gateway_id: r.gateway_id.clone(),
        tool_name: r.tool_name.clone(),
        toolkit_name: r.toolkit_name.clone(),
        toolkit_version: r.toolkit_version.clone(),
        user_id: r.user_id.clone(),
        surface: pb::Surface::from_name(&r.surface).unwrap_or(pb::Surface::Rest) as i32,
        execution_type: pb::ExecutionType::from_name(&r.execution_type).unwrap_or_default() as i32,
        created_at_ms: r.created_at,
        scheduled_at_ms: r.scheduled_at,
        started_at_ms: r.started_at,
        finished_at_ms: r.finished_at,
        updated_at_ms: r.updated_at,
        execution_deadline_ms: r.execution_deadline,
        retention_expires_at_ms: r.retention_expires_at,
        poll_interval_ms: r.poll_interval_ms,
        owner_loss_detection_at_ms: r.state.owner_loss_detection_at,
        error_message: r.error_message.clone().unwrap_or_default(),
        summary: r.summary.clone().unwrap_or_default(),
        input_requests: Vec::new(),
        cancel_state: cancel_state as i32,
        progress: progress(r),
        cursor: r.changed_version,
        ..Default::default()
    };
    view.write_failure_reason(r.failure_reason().map(failure_reason).unwrap_or_default());
    view
}

/// The tool's latest progress report, if any.
pub(crate) fn progress(r: &ExecutionRecord) -> Option<pb::ExecutionProgress> {
    r.progress.as_ref().map(|p| pb::ExecutionProgress {
        current: p.current,
        total: p.total,
        message: p.message.clone(),
        updated_at_ms: p.at,
    })
}

pub(crate) fn tool(t: &ToolRecord) -> pb::ToolDefinition {
    pb::ToolDefinition {
        name: t.name.clone(),
        toolkit_name: t.toolkit_name.clone(),
        toolkit_version: t.toolkit_version.clone(),
        description: t.description.clone(),
        input_schema_json: t.input_schema.clone(),
        background: t.background.map_or(wpb::BackgroundPolicy::Unspecified, background) as i32,
        task_time_input: t.task_time_input,
        required_client_capabilities: t.required_client_capabilities.clone(),
        title: t.metadata.title.clone(),
        annotations_json: t.metadata.annotations.clone(),
        output_schema_json: t.metadata.output_schema.clone(),
        icons_json: t.metadata.icons.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::CredentialKind;

    #[test]
    fn the_domain_spells_every_surface_as_the_wire_does() {
        for &s in pb::Surface::ALL {
            assert_eq!(surface(s).as_str(), s.name());
        }
        assert_eq!(surface(pb::Surface::Unspecified), Surface::Rest);
    }

    /// The domain spells statuses for the database; the wire spells them for
    /// REST, MCP and JSON. They must be the same words.
    #[test]
    fn domain_and_wire_spell_statuses_alike() {
        for s in Status::ALL {
            assert_eq!(status(s).name(), s.as_str());
            assert_eq!(known_status(status(s)), Some(s));
        }
        assert_eq!(known_status(pb::ExecutionStatus::Unspecified), None);
        assert_eq!(pb::ExecutionStatus::ALL.len(), Status::ALL.len());
    }

    #[test]
    fn stop_reasons_survive_the_wire() {
        for r in [StopReason::Cancelled, StopReason::DeadlineExceeded, StopReason::OwnerLost] {
            assert_eq!(stop_reason_from_wire(stop_reason(r)), Some(r));
        }
        assert_eq!(stop_reason_from_wire(wpb::StopReason::Unspecified), None);
    }

    /// The audit log records cancel outcomes in the words every surface answers.
    #[test]
    fn cancel_outcomes_are_spelled_as_on_the_wire() {
        use CancelOutcome::*;
        for o in [Accepted, Unsupported, AlreadyTerminal, StopDeliveryUnknown, StopAlreadyRequested] {
            assert_eq!(cancel_outcome(o).name(), o.as_str());
        }
    }

    /// Credentials are stored by kind; `WhoAmI` answers the same words.
    #[test]
    fn credential_kinds_are_principal_kinds() {
        for k in [CredentialKind::EndUser, CredentialKind::ApiKey, CredentialKind::Worker] {
            assert!(pb::PrincipalKind::from_name(k.as_str()).is_some(), "{}", k.as_str());
        }
    }

    /// The gateway checks the shape of an id before asking; every id minted must pass.
    #[test]
    fn minted_execution_ids_have_the_shape_the_gateway_checks() {
        for _ in 0..100 {
            let id = crate::domain::ExecutionId::generate();
            assert!(baton_proto::names::is_execution_id(id.as_str()), "{id}");
        }
        assert_eq!(crate::domain::ExecutionId::PREFIX, baton_proto::names::EXECUTION_ID_PREFIX);
        assert_eq!(crate::domain::ExecutionId::DIGITS, baton_proto::names::EXECUTION_ID_DIGITS);
    }

    #[test]
    fn unreadable_actions_cancel() {
        assert_eq!(input_action("accept"), wpb::InputAction::Accept);
        assert_eq!(input_action(""), wpb::InputAction::Cancel);
        assert_eq!(input_action("maybe"), wpb::InputAction::Cancel);
    }
}

//! What a 0.1 gateway reads from today's coordinator (decision 0051): it
//! sends no `baton-version` (as 0.1 did) and reads only the strings that
//! today's enums replaced, so the coordinator fills each string beside its
//! enum, spelled as 0.1 spelled it.
#![allow(deprecated)]

use crate::harness::{Cluster, Settings};
use anyhow::Result;
use baton_proto::coordinator::v1::{
    self as pb, FailureReason, Role, TimelineEvent, coordinator_client::CoordinatorClient,
};
use serde_json::json;
use std::time::Duration;

fn with_bearer<T>(message: T, bearer: &str) -> Result<tonic::Request<T>> {
    let mut r = tonic::Request::new(message);
    r.metadata_mut().insert("authorization", format!("Bearer {bearer}").parse()?);
    Ok(r)
}

#[tokio::test]
async fn a_0_1_gateway_reads_every_string_twin_filled_by_todays_coordinator() -> Result<()> {
    let c = Cluster::single(Settings::default()).await?;
    let alice = c.rest(0, &c.id.user_token);
    let started = alice.start("Demo.Fail", json!({"retryable": false}), None).await?.json();
    let id = started["execution_id"].as_str().unwrap_or_default().to_owned();
    let done = alice.until_terminal(&id, Duration::from_secs(20)).await?;
    assert_eq!(done["failure_reason"], "tool_error", "{done}");

    let mut coordinator = CoordinatorClient::new(crate::worker_trust::channel(&c, 0, None).await?);
    let (org_id, project_id) = (c.id.org_id.clone(), c.id.project_id.clone());
    let get =
        pb::GetExecutionRequest { org_id: org_id.clone(), project_id: project_id.clone(), execution_id: id.clone() };
    let view = coordinator.get_execution(with_bearer(get, &c.id.user_token)?).await?.into_inner();
    assert_eq!((view.failure_reason.as_str(), view.failure()), ("tool_error", FailureReason::ToolError));

    let changes = pb::ListExecutionChangesRequest { org_id, project_id, execution_id: id, after: 0 };
    let changes = coordinator.list_execution_changes(with_bearer(changes, &c.id.user_token)?).await?.into_inner();
    let kinds: Vec<(&str, TimelineEvent)> = changes.changes.iter().map(|e| (e.kind.as_str(), e.event())).collect();
    assert_eq!(kinds.first(), Some(&("created", TimelineEvent::Created)), "{kinds:?}");
    assert!(kinds.iter().all(|(kind, event)| event.name() == *kind && !kind.is_empty()), "{kinds:?}");

    for (key, role, spelled) in [
        (&c.id.admin_key, Role::Admin, "admin"),
        (&c.id.member_key, Role::Member, "member"),
        (&c.id.read_only_key, Role::ReadOnly, "read_only"),
    ] {
        let who = coordinator.who_am_i(with_bearer(pb::WhoAmIRequest::default(), key)?).await?.into_inner();
        assert_eq!((who.role.as_str(), who.project_role()), (spelled, role));
    }
    Ok(())
}

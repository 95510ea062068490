//! The execution history calls of the typed client (`baton.coordinator.v1.History`,
//! served next to `Coordinator` on the same connection). Like every call, each
//! takes the caller's bearer and the scope, and the coordinator decides.

use super::{Bearer, Coordinator, Scope};
use baton_proto::coordinator::v1 as pb;
use baton_proto::error::WireError;
use pb::history_client::HistoryClient;
use tonic::transport::Channel;

/// What a history read narrows to; `None` narrows nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HistoryQuery {
    pub(crate) tool_name: Option<String>,
    pub(crate) toolkit_name: Option<String>,
    pub(crate) user_id: Option<String>,
    pub(crate) outcome: Option<pb::ExecutionOutcome>,
    pub(crate) failure_reason: Option<pb::FailureReason>,
    /// Runs created at or after this.
    pub(crate) start_ms: Option<i64>,
    /// Runs created before this.
    pub(crate) end_ms: Option<i64>,
}

impl HistoryQuery {
    fn filter(&self) -> pb::HistoryFilter {
        pb::HistoryFilter {
            tool_name: self.tool_name.clone().unwrap_or_default(),
            toolkit_name: self.toolkit_name.clone().unwrap_or_default(),
            user_id: self.user_id.clone().unwrap_or_default(),
            outcome: self.outcome.unwrap_or_default() as i32,
            failure_reason: self.failure_reason.unwrap_or_default() as i32,
            start_time_ms: self.start_ms,
            end_time_ms: self.end_ms,
        }
    }
}

/// The payloads a detail read asks for (each needs an admin key).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reveal {
    pub(crate) inputs: bool,
    pub(crate) outputs: bool,
}

impl Coordinator {
    fn history(&self) -> HistoryClient<Channel> {
        HistoryClient::new(self.channel.clone())
    }

    /// One page of the project's runs, newest first, and the total that match.
    pub(crate) async fn history_list(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        query: &HistoryQuery,
        limit: u32,
        offset: u32,
    ) -> Result<pb::ListHistoryResponse, WireError> {
        let request = pb::ListHistoryRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            filter: Some(query.filter()),
            limit,
            offset,
        };
        let mut client = self.history();
        self.call(bearer, request, None, |_, r| async move { client.list_history(r).await }).await
    }

    /// How many of the project's runs match.
    pub(crate) async fn history_count(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        query: &HistoryQuery,
    ) -> Result<u64, WireError> {
        let request = pb::CountHistoryRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            filter: Some(query.filter()),
        };
        let mut client = self.history();
        let answer = self.call(bearer, request, None, |_, r| async move { client.count_history(r).await }).await?;
        Ok(answer.count)
    }

    /// One run with its timeline and attempts, and the payloads `reveal` asks for.
    pub(crate) async fn history_detail(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
        reveal: Reveal,
    ) -> Result<pb::HistoryDetail, WireError> {
        let request = pb::GetHistoryRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            execution_id: id.to_owned(),
            include_inputs: reveal.inputs,
            include_outputs: reveal.outputs,
        };
        let mut client = self.history();
        self.call(bearer, request, None, |_, r| async move { client.get_history(r).await }).await
    }
}

//! The operator calls of the typed client (`baton.coordinator.v1.Operator`,
//! served next to `Coordinator` on the same connection).

use super::{Bearer, Coordinator, Scope};
use baton_proto::coordinator::v1 as pb;
use baton_proto::error::WireError;
use pb::operator_client::OperatorClient;
use tonic::transport::Channel;

impl Coordinator {
    fn operator(&self) -> OperatorClient<Channel> {
        OperatorClient::new(self.channel.clone())
    }

    fn execution_request(scope: &Scope, id: &str) -> pb::GetExecutionRequest {
        pb::GetExecutionRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            execution_id: id.to_owned(),
        }
    }

    /// One page of every execution of the scope's project.
    pub(crate) async fn operator_list(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        cursor: &str,
        limit: u32,
    ) -> Result<pb::ListExecutionsResponse, WireError> {
        let request = super::list_request(scope, cursor, limit, String::new());
        let mut client = self.operator();
        self.call(bearer, request, None, |_, r| async move { client.list_operator_executions(r).await }).await
    }

    /// One execution's safe status.
    pub(crate) async fn operator_status(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
    ) -> Result<pb::ExecutionView, WireError> {
        let request = Self::execution_request(scope, id);
        let mut client = self.operator();
        self.call(bearer, request, None, |_, r| async move { client.get_operator_execution(r).await }).await
    }

    /// One execution's input and result.
    pub(crate) async fn operator_payload(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
    ) -> Result<pb::OperatorPayload, WireError> {
        let request = Self::execution_request(scope, id);
        let mut client = self.operator();
        self.call(bearer, request, None, |_, r| async move { client.get_operator_payload(r).await }).await
    }

    /// Asks the execution to stop.
    pub(crate) async fn operator_cancel(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
    ) -> Result<pb::CancelExecutionResponse, WireError> {
        let request = pb::CancelExecutionRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            execution_id: id.to_owned(),
        };
        let mut client = self.operator();
        self.call(bearer, request, None, |_, r| async move { client.cancel_operator_execution(r).await }).await
    }
}

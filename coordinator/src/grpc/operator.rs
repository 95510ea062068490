//! `baton.coordinator.v1.Operator`: operator recovery over the engine's
//! operator use cases.

use super::authorization;
use super::convert::{cancel_outcome, view};
use super::status::to_status;
use crate::engine::{Engine, Scope};
use baton_proto::coordinator::v1::{self as pb, operator_server::Operator};
use std::sync::Arc;
use tonic::{Request, Response, Status};

pub(crate) struct OperatorService {
    pub(crate) engine: Arc<Engine>,
}

type Reply<T> = Result<Response<T>, Status>;

fn scope<'a>(org_id: &'a str, project_id: &'a str) -> Scope<'a> {
    Scope { org_id, project_id }
}

#[tonic::async_trait]
impl Operator for OperatorService {
    async fn list_operator_executions(
        &self,
        req: Request<pb::ListExecutionsRequest>,
    ) -> Reply<pb::ListExecutionsResponse> {
        let r = req.get_ref();
        let limit = if r.limit == 0 { 50 } else { r.limit };
        let (rows, next) = self
            .engine
            .operator_list(authorization(&req), scope(&r.org_id, &r.project_id), limit, &r.cursor)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListExecutionsResponse {
            executions: rows.iter().map(view).collect(),
            next_cursor: next.unwrap_or_default(),
        }))
    }

    async fn get_operator_execution(&self, req: Request<pb::GetExecutionRequest>) -> Reply<pb::ExecutionView> {
        let r = req.get_ref();
        let record = self
            .engine
            .operator_status(authorization(&req), scope(&r.org_id, &r.project_id), &r.execution_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(view(&record)))
    }

    async fn get_operator_payload(&self, req: Request<pb::GetExecutionRequest>) -> Reply<pb::OperatorPayload> {
        let r = req.get_ref();
        let found = self
            .engine
            .operator_payload(authorization(&req), scope(&r.org_id, &r.project_id), &r.execution_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::OperatorPayload {
            execution: Some(view(&found.record)),
            input_json: found.input,
            result_json: found.result,
        }))
    }

    async fn cancel_operator_execution(
        &self,
        req: Request<pb::CancelExecutionRequest>,
    ) -> Reply<pb::CancelExecutionResponse> {
        let r = req.get_ref();
        let (outcome, record) = self
            .engine
            .operator_cancel(authorization(&req), scope(&r.org_id, &r.project_id), &r.execution_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::CancelExecutionResponse {
            outcome: cancel_outcome(outcome) as i32,
            execution: Some(view(&record)),
        }))
    }
}

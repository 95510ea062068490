//! `baton.coordinator.v1.Peer`: another replica asks this one to deliver a stop
//! to a worker session held here.

use crate::engine::Engine;
use baton_proto::coordinator::v1::{
    DeliverCancelRequest, DeliverCancelResponse, DeliverInputRequest, peer_server::Peer,
};
use baton_proto::worker::v1::{InputResponse, coordinator_message::Msg};
use std::sync::Arc;
use tonic::{Request, Response, Status};

pub struct PeerService {
    pub engine: Arc<Engine>,
}

#[tonic::async_trait]
impl Peer for PeerService {
    async fn deliver_cancel(
        &self,
        req: Request<DeliverCancelRequest>,
    ) -> Result<Response<DeliverCancelResponse>, Status> {
        let r = req.into_inner();
        let delivered = match self.engine.sessions.get(&r.worker_id) {
            Some(session) => session.stop(&r.execution_id, r.attempt, &r.reason).await,
            None => false,
        };
        Ok(Response::new(DeliverCancelResponse { delivered }))
    }

    async fn deliver_input(
        &self,
        req: Request<DeliverInputRequest>,
    ) -> Result<Response<DeliverCancelResponse>, Status> {
        let r = req.into_inner();
        let delivered = match self.engine.sessions.get(&r.worker_id) {
            Some(session) => {
                session
                    .send(Msg::InputResponse(InputResponse {
                        execution_id: r.execution_id,
                        attempt: r.attempt,
                        remote_key: r.remote_key,
                        action: r.action,
                        content_json: r.content_json,
                    }))
                    .await
            }
            None => false,
        };
        Ok(Response::new(DeliverCancelResponse { delivered }))
    }
}

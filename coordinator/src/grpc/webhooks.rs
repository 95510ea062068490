//! `baton.coordinator.v1.Webhooks`: a project's webhook endpoints and their
//! delivery state, over the engine's webhook use cases.

use super::authorization;
use super::convert::status;
use super::status::to_status;
use crate::domain::Status as ExecutionStatus;
use crate::engine::{Engine, Scope};
use crate::store::{DeliveryRecord, EndpointRecord};
use crate::webhooks::manage::WithSecret;
use baton_proto::coordinator::v1::{self as pb, webhooks_server::Webhooks};
use std::sync::Arc;
use tonic::{Request, Response, Status};

pub(crate) struct WebhooksService {
    pub(crate) engine: Arc<Engine>,
}

type Reply<T> = Result<Response<T>, Status>;

fn scope<'a>(org_id: &'a str, project_id: &'a str) -> Scope<'a> {
    Scope { org_id, project_id }
}

fn webhook(e: &EndpointRecord) -> pb::Webhook {
    pb::Webhook {
        webhook_id: e.id.clone(),
        url: e.url.clone(),
        event_type: e.event_type.clone(),
        enabled: e.enabled,
        created_at_ms: e.created_at,
        updated_at_ms: e.updated_at,
        previous_secret_expires_at_ms: e.previous_until.filter(|until| *until > baton_proto::clock::now_ms()),
    }
}

fn with_secret(w: WithSecret) -> pb::WebhookWithSecret {
    pb::WebhookWithSecret { webhook: Some(webhook(&w.endpoint)), secret: w.secret }
}

fn delivery(d: &DeliveryRecord) -> pb::WebhookDelivery {
    let state = ExecutionStatus::parse(&d.state).map_or(pb::ExecutionStatus::Unspecified, status);
    let outcome = pb::WebhookDeliveryStatus::from_name(&d.status).unwrap_or(pb::WebhookDeliveryStatus::Unspecified);
    pb::WebhookDelivery {
        message_id: d.message_id.clone(),
        execution_id: d.execution_id.clone(),
        state: state as i32,
        status: outcome as i32,
        attempts: d.attempts,
        created_at_ms: d.created_at,
        last_attempt_at_ms: d.last_attempt_at,
        last_status_code: d.last_status_code,
        last_error: d.last_error.clone(),
        next_attempt_at_ms: d.next_attempt_at,
        finished_at_ms: d.finished_at,
    }
}

#[tonic::async_trait]
impl Webhooks for WebhooksService {
    async fn create_webhook(&self, req: Request<pb::CreateWebhookRequest>) -> Reply<pb::WebhookWithSecret> {
        let r = req.get_ref();
        let created = self
            .engine
            .create_webhook(authorization(&req), scope(&r.org_id, &r.project_id), &r.url, &r.event_type)
            .await
            .map_err(to_status)?;
        Ok(Response::new(with_secret(created)))
    }

    async fn list_webhooks(&self, req: Request<pb::ListWebhooksRequest>) -> Reply<pb::ListWebhooksResponse> {
        let r = req.get_ref();
        let found =
            self.engine.list_webhooks(authorization(&req), scope(&r.org_id, &r.project_id)).await.map_err(to_status)?;
        Ok(Response::new(pb::ListWebhooksResponse { webhooks: found.iter().map(webhook).collect() }))
    }

    async fn get_webhook(&self, req: Request<pb::WebhookRequest>) -> Reply<pb::Webhook> {
        let r = req.get_ref();
        let found = self
            .engine
            .get_webhook(authorization(&req), scope(&r.org_id, &r.project_id), &r.webhook_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(webhook(&found)))
    }

    async fn set_webhook_enabled(&self, req: Request<pb::SetWebhookEnabledRequest>) -> Reply<pb::Webhook> {
        let r = req.get_ref();
        let changed = self
            .engine
            .set_webhook_enabled(authorization(&req), scope(&r.org_id, &r.project_id), &r.webhook_id, r.enabled)
            .await
            .map_err(to_status)?;
        Ok(Response::new(webhook(&changed)))
    }

    async fn delete_webhook(&self, req: Request<pb::WebhookRequest>) -> Reply<pb::DeleteWebhookResponse> {
        let r = req.get_ref();
        self.engine
            .delete_webhook(authorization(&req), scope(&r.org_id, &r.project_id), &r.webhook_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::DeleteWebhookResponse {}))
    }

    async fn rotate_webhook_secret(&self, req: Request<pb::WebhookRequest>) -> Reply<pb::WebhookWithSecret> {
        let r = req.get_ref();
        let rotated = self
            .engine
            .rotate_webhook_secret(authorization(&req), scope(&r.org_id, &r.project_id), &r.webhook_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(with_secret(rotated)))
    }

    async fn list_webhook_deliveries(
        &self,
        req: Request<pb::ListWebhookDeliveriesRequest>,
    ) -> Reply<pb::ListWebhookDeliveriesResponse> {
        let r = req.get_ref();
        let limit = if r.limit == 0 { 50 } else { r.limit };
        let found = self
            .engine
            .webhook_deliveries(authorization(&req), scope(&r.org_id, &r.project_id), &r.webhook_id, limit)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListWebhookDeliveriesResponse { deliveries: found.iter().map(delivery).collect() }))
    }
}

//! The webhook calls of the typed client (`baton.coordinator.v1.Webhooks`,
//! served next to `Coordinator` on the same connection).

use super::{Bearer, Coordinator, Scope};
use baton_proto::coordinator::v1 as pb;
use baton_proto::error::WireError;
use pb::webhooks_client::WebhooksClient;
use tonic::transport::Channel;

fn request(scope: &Scope, id: &str) -> pb::WebhookRequest {
    pb::WebhookRequest { org_id: scope.org_id.clone(), project_id: scope.project_id.clone(), webhook_id: id.to_owned() }
}

impl Coordinator {
    fn webhooks(&self) -> WebhooksClient<Channel> {
        WebhooksClient::new(self.channel.clone())
    }

    pub(crate) async fn create_webhook(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        url: &str,
        event_type: &str,
    ) -> Result<pb::WebhookWithSecret, WireError> {
        let request = pb::CreateWebhookRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            url: url.to_owned(),
            event_type: event_type.to_owned(),
        };
        let mut client = self.webhooks();
        self.call(bearer, request, None, |_, r| async move { client.create_webhook(r).await }).await
    }

    pub(crate) async fn list_webhooks(
        &self,
        bearer: &Bearer,
        scope: &Scope,
    ) -> Result<pb::ListWebhooksResponse, WireError> {
        let request = pb::ListWebhooksRequest { org_id: scope.org_id.clone(), project_id: scope.project_id.clone() };
        let mut client = self.webhooks();
        self.call(bearer, request, None, |_, r| async move { client.list_webhooks(r).await }).await
    }

    pub(crate) async fn get_webhook(&self, bearer: &Bearer, scope: &Scope, id: &str) -> Result<pb::Webhook, WireError> {
        let mut client = self.webhooks();
        self.call(bearer, request(scope, id), None, |_, r| async move { client.get_webhook(r).await }).await
    }

    pub(crate) async fn set_webhook_enabled(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
        enabled: bool,
    ) -> Result<pb::Webhook, WireError> {
        let request = pb::SetWebhookEnabledRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            webhook_id: id.to_owned(),
            enabled,
        };
        let mut client = self.webhooks();
        self.call(bearer, request, None, |_, r| async move { client.set_webhook_enabled(r).await }).await
    }

    pub(crate) async fn delete_webhook(&self, bearer: &Bearer, scope: &Scope, id: &str) -> Result<(), WireError> {
        let mut client = self.webhooks();
        self.call(bearer, request(scope, id), None, |_, r| async move { client.delete_webhook(r).await }).await?;
        Ok(())
    }

    pub(crate) async fn rotate_webhook_secret(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
    ) -> Result<pb::WebhookWithSecret, WireError> {
        let mut client = self.webhooks();
        self.call(bearer, request(scope, id), None, |_, r| async move { client.rotate_webhook_secret(r).await }).await
    }

    pub(crate) async fn webhook_deliveries(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
        limit: u32,
    ) -> Result<pb::ListWebhookDeliveriesResponse, WireError> {
        let request = pb::ListWebhookDeliveriesRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            webhook_id: id.to_owned(),
            limit,
        };
        let mut client = self.webhooks();
        self.call(bearer, request, None, |_, r| async move { client.list_webhook_deliveries(r).await }).await
    }
}

//! Webhook management for project admins (an API key with the `admin` role
//! of the project in the path; anyone else of the project is refused and the
//! refusal audited, another project's caller gets not-found), and the start of
//! this replica's deliverer. The rules themselves are `crate::webhooks::manage`.

use super::{Engine, Error, Result, Scope};
use crate::audit::Actor;
use crate::authz::{self, Principal, Role};
use crate::store::{DeliveryRecord, EndpointRecord};
use crate::webhooks::deliver::Deliverer;
use crate::webhooks::manage::{self, WithSecret, action};
use std::sync::Arc;

impl From<manage::Error> for Error {
    fn from(e: manage::Error) -> Self {
        match e {
            manage::Error::Store(e) => Error::Store(e),
            manage::Error::Crypto(e) => Error::Crypto(e),
            manage::Error::Target(t) => Error::Invalid(t.to_string()),
            manage::Error::Invalid(m) => Error::Invalid(m),
            manage::Error::NotFound => Error::Missing("webhook"),
        }
    }
}

impl Engine {
    /// Authenticates and checks that the caller administers the scope's project.
    async fn webhook_admin(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        action: &'static str,
    ) -> Result<Principal> {
        let p = self.authenticate(authorization).await?;
        if p.in_scope(scope.org_id, scope.project_id).is_err() {
            return Err(Error::Missing("webhook"));
        }
        if !matches!(p, Principal::ApiKey { role: Role::Admin, .. }) {
            let why = "managing webhooks needs an admin API key of this project";
            manage::audit_refused(&self.store, &Actor::of(&p), scope.org_id, scope.project_id, action, why.into())
                .await?;
            return Err(authz::Error::Forbidden(why).into());
        }
        Ok(p)
    }

    /// The endpoint `id` of the scope's project.
    async fn scoped_webhook(&self, scope: Scope<'_>, id: &str) -> Result<EndpointRecord> {
        if !manage::is_webhook_id(id) {
            return Err(Error::Missing("webhook"));
        }
        match self.store.webhook(id).await? {
            Some(e) if e.org_id == scope.org_id && e.project_id == scope.project_id => Ok(e),
            _ => Err(Error::Missing("webhook")),
        }
    }

    pub(crate) async fn create_webhook(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        url: &str,
        event_type: &str,
    ) -> Result<WithSecret> {
        let p = self.webhook_admin(authorization, scope, action::CREATE).await?;
        let o = &self.options;
        Ok(manage::create(&self.store, &self.ring, &o.webhooks, &Actor::of(&p), scope.project_id, url, event_type)
            .await?)
    }

    pub(crate) async fn list_webhooks(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
    ) -> Result<Vec<EndpointRecord>> {
        self.webhook_admin(authorization, scope, action::LIST).await?;
        Ok(self.store.webhooks(scope.project_id).await?)
    }

    pub(crate) async fn get_webhook(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        id: &str,
    ) -> Result<EndpointRecord> {
        self.webhook_admin(authorization, scope, action::GET).await?;
        self.scoped_webhook(scope, id).await
    }

    pub(crate) async fn set_webhook_enabled(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        id: &str,
        enabled: bool,
    ) -> Result<EndpointRecord> {
        let done = if enabled { action::ENABLE } else { action::DISABLE };
        let p = self.webhook_admin(authorization, scope, done).await?;
        let endpoint = self.scoped_webhook(scope, id).await?;
        Ok(manage::set_enabled(&self.store, &Actor::of(&p), &endpoint, enabled).await?)
    }

    pub(crate) async fn delete_webhook(&self, authorization: Option<&str>, scope: Scope<'_>, id: &str) -> Result<()> {
        let p = self.webhook_admin(authorization, scope, action::DELETE).await?;
        let endpoint = self.scoped_webhook(scope, id).await?;
        Ok(manage::delete(&self.store, &Actor::of(&p), &endpoint).await?)
    }

    pub(crate) async fn rotate_webhook_secret(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        id: &str,
    ) -> Result<WithSecret> {
        let p = self.webhook_admin(authorization, scope, action::ROTATE_SECRET).await?;
        let endpoint = self.scoped_webhook(scope, id).await?;
        Ok(manage::rotate(&self.store, &self.ring, &self.options.webhooks, &Actor::of(&p), &endpoint).await?)
    }

    /// The endpoint's most recent deliveries: last attempt, status, next retry.
    pub(crate) async fn webhook_deliveries(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        id: &str,
        limit: u32,
    ) -> Result<Vec<DeliveryRecord>> {
        self.webhook_admin(authorization, scope, action::DELIVERIES).await?;
        let endpoint = self.scoped_webhook(scope, id).await?;
        Ok(manage::deliveries(&self.store, &endpoint.id, limit).await?)
    }

    /// Starts this replica's deliverer (every replica runs one).
    pub(super) fn start_webhook_delivery(self: &Arc<Self>) {
        let options = self.options.webhooks.clone();
        match Deliverer::new(self.store.clone(), self.ring.clone(), options, self.options.id.clone()) {
            Ok(d) => {
                self.tasks.spawn(Arc::new(d).run(self.webhook_wake.clone(), self.shutdown.clone()));
            }
            Err(e) => tracing::error!(error = %e, "webhook delivery cannot start; signals wait in the outbox"),
        }
    }
}

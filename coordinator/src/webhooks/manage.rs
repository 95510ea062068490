//! Managing a project's endpoints: the rules shared by the REST API (through
//! the engine, which first checks that the caller is an admin of the project)
//! and `baton admin webhook` (trusted: it holds the database credentials).
//! Secrets are generated here, shown once, and stored sealed with the payload
//! key ring. Every change is written to the audit log (`crate::audit`); a
//! change whose row cannot be written answers an error.

use super::{EVENT_TYPE, Options, sign, target};
use crate::audit::{Actor, Record, outcome};
use crate::crypto::{self, Field, KeyRing};
use crate::domain::id::random_id;
use crate::store::{self, DeliveryRecord, EndpointRecord, Store};
use baton_proto::clock::now_ms;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error(transparent)]
    Crypto(#[from] crypto::Error),
    #[error(transparent)]
    Target(#[from] target::Error),
    #[error("{0}")]
    Invalid(String),
    #[error("webhook not found")]
    NotFound,
}

/// The actions webhook management records.
pub(crate) mod action {
    pub(crate) const CREATE: &str = "webhook.create";
    pub(crate) const LIST: &str = "webhook.list";
    pub(crate) const GET: &str = "webhook.get";
    pub(crate) const ENABLE: &str = "webhook.enable";
    pub(crate) const DISABLE: &str = "webhook.disable";
    pub(crate) const DELETE: &str = "webhook.delete";
    pub(crate) const ROTATE_SECRET: &str = "webhook.rotate_secret";
    pub(crate) const DELIVERIES: &str = "webhook.deliveries";
}

/// An endpoint with its secret in the clear: the answer to a create or a
/// rotation, the only times a secret is shown.
#[derive(Clone, Debug)]
pub struct WithSecret {
    pub endpoint: EndpointRecord,
    pub secret: String,
}

/// The most deliveries one read returns.
pub(crate) const MAX_DELIVERIES: u32 = 200;

/// Records a change to `e` (never a secret).
async fn audit(
    store: &Store,
    actor: &Actor,
    e: &EndpointRecord,
    action: &'static str,
    detail: Option<String>,
) -> Result<(), Error> {
    let record = Record {
        org_id: &e.org_id,
        project_id: Some(&e.project_id),
        action,
        target: Some(&e.id),
        outcome: outcome::ALLOWED,
        detail,
    };
    Ok(crate::audit::append(store, actor, record).await?)
}

/// Records a refused webhook operation of a caller of the project.
pub(crate) async fn audit_refused(
    store: &Store,
    actor: &Actor,
    org_id: &str,
    project_id: &str,
    action: &'static str,
    why: String,
) -> Result<(), Error> {
    let record = Record {
        org_id,
        project_id: Some(project_id),
        action,
        target: None,
        outcome: outcome::REFUSED,
        detail: Some(why),
    };
    Ok(crate::audit::append(store, actor, record).await?)
}

fn seal(ring: &KeyRing, endpoint_id: &str, secret: &str) -> Result<Vec<u8>, Error> {
    Ok(ring.seal(endpoint_id, Field::WebhookSecret, secret.as_bytes())?)
}

/// Creates an endpoint after checking its target against the address policy.
pub async fn create(
    store: &Store,
    ring: &KeyRing,
    options: &Options,
    actor: &Actor,
    project_id: &str,
    url: &str,
    event_type: &str,
) -> Result<WithSecret, Error> {
    if event_type != EVENT_TYPE {
        return Err(Error::Invalid(format!("`event_type` must be {EVENT_TYPE:?}")));
    }
    let checked = target::check(url, target::Policy::from_options(options)).await?;
    let org_id = store.project_org(project_id).await?.ok_or(Error::NotFound)?;
    let id = random_id("wh_", 96);
    let secret = sign::generate_secret();
    let now = now_ms();
    let endpoint = EndpointRecord {
        secret_ct: seal(ring, &id, &secret)?,
        id,
        org_id,
        project_id: project_id.to_owned(),
        url: checked.to_string(),
        event_type: EVENT_TYPE.to_owned(),
        previous_secret_ct: None,
        previous_until: None,
        enabled: true,
        created_at: now,
        updated_at: now,
    };
    let cap = options.max_endpoints_per_project;
    if !store.create_webhook(&endpoint, cap).await? {
        return Err(Error::Invalid(format!(
            "the project has {cap} webhook endpoints, the most webhooks.max_endpoints_per_project allows: delete one first"
        )));
    }
    audit(store, actor, &endpoint, action::CREATE, Some(format!("url={}", redacted(&checked)))).await?;
    Ok(WithSecret { endpoint, secret })
}

/// A URL as the audit log keeps it: scheme, host, port and path; a query
/// string or fragment (where secrets ride) only as `?…`.
fn redacted(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    let hidden = shown.query().is_some() || shown.fragment().is_some();
    shown.set_query(None);
    shown.set_fragment(None);
    if hidden { format!("{shown}?…") } else { shown.to_string() }
}

/// Whether `id` could be an endpoint's id (`wh_` and letters or digits):
/// anything else, a NUL byte Postgres would refuse included, is not found
/// without a read.
pub(crate) fn is_webhook_id(id: &str) -> bool {
    id.strip_prefix("wh_")
        .is_some_and(|rest| (1..=64).contains(&rest.len()) && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// The endpoint, if it exists.
pub async fn get(store: &Store, id: &str) -> Result<EndpointRecord, Error> {
    if !is_webhook_id(id) {
        return Err(Error::NotFound);
    }
    store.webhook(id).await?.ok_or(Error::NotFound)
}

pub async fn set_enabled(
    store: &Store,
    actor: &Actor,
    endpoint: &EndpointRecord,
    enabled: bool,
) -> Result<EndpointRecord, Error> {
    if !store.set_webhook_enabled(&endpoint.id, enabled, now_ms()).await? {
        return Err(Error::NotFound);
    }
    let done = if enabled { action::ENABLE } else { action::DISABLE };
    audit(store, actor, endpoint, done, None).await?;
    get(store, &endpoint.id).await
}

pub async fn delete(store: &Store, actor: &Actor, endpoint: &EndpointRecord) -> Result<(), Error> {
    if !store.delete_webhook(&endpoint.id).await? {
        return Err(Error::NotFound);
    }
    audit(store, actor, endpoint, action::DELETE, None).await
}

/// A new current secret; the one it replaces keeps signing (a second
/// signature on every delivery) for `options.rotation_overlap_ms`.
pub async fn rotate(
    store: &Store,
    ring: &KeyRing,
    options: &Options,
    actor: &Actor,
    endpoint: &EndpointRecord,
) -> Result<WithSecret, Error> {
    let secret = sign::generate_secret();
    let sealed = seal(ring, &endpoint.id, &secret)?;
    let now = now_ms();
    let until = now.saturating_add(options.rotation_overlap_ms);
    if !store.rotate_webhook_secret(&endpoint.id, &sealed, &endpoint.secret_ct, until, now).await? {
        return Err(Error::NotFound);
    }
    audit(store, actor, endpoint, action::ROTATE_SECRET, None).await?;
    Ok(WithSecret { endpoint: get(store, &endpoint.id).await?, secret })
}

/// The endpoint's most recent deliveries, newest first.
pub async fn deliveries(store: &Store, endpoint_id: &str, limit: u32) -> Result<Vec<DeliveryRecord>, Error> {
    if !(1..=MAX_DELIVERIES).contains(&limit) {
        return Err(Error::Invalid(format!("`limit` must be between 1 and {MAX_DELIVERIES}")));
    }
    Ok(store.webhook_deliveries(endpoint_id, limit).await?)
}

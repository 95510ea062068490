//! `baton admin webhook …`: a project's webhook endpoints, managed against the
//! deployment's database with the deployment's configuration (the payload key
//! ring seals secrets; `webhooks.allow_*_targets` decide which targets pass).
//! Prints one JSON object per command; a secret is shown once, on create and
//! rotate. Every change is audited with the actor `cli`.

use crate::config::Config;
use baton_coordinator::store::{DeliveryRecord, EndpointRecord, Store};
use baton_coordinator::webhooks::{EVENT_TYPE, manage};
use clap::Subcommand;
use serde_json::{Value, json};

#[derive(Subcommand)]
pub(crate) enum Action {
    /// A new endpoint; prints its whsec_ secret (shown only now).
    Create {
        #[arg(long)]
        project: String,
        #[arg(long)]
        url: String,
        #[arg(long, default_value = EVENT_TYPE)]
        event_type: String,
    },
    /// The project's endpoints.
    List {
        #[arg(long)]
        project: String,
    },
    Disable {
        #[arg(long)]
        id: String,
    },
    Enable {
        #[arg(long)]
        id: String,
    },
    /// Deletes the endpoint and the signals still owed to it.
    Delete {
        #[arg(long)]
        id: String,
    },
    /// A new secret; the previous one keeps signing during the configured overlap.
    RotateSecret {
        #[arg(long)]
        id: String,
    },
    /// The endpoint's most recent deliveries: last attempt, status, next retry.
    Deliveries {
        #[arg(long)]
        id: String,
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
}

fn view(e: &EndpointRecord) -> Value {
    json!({
        "webhook_id": e.id, "project_id": e.project_id, "url": e.url, "event_type": e.event_type,
        "enabled": e.enabled, "created_at_ms": e.created_at, "updated_at_ms": e.updated_at,
        "previous_secret_expires_at_ms": e.previous_until,
    })
}

fn delivery(d: &DeliveryRecord) -> Value {
    json!({
        "message_id": d.message_id, "execution_id": d.execution_id, "state": d.state, "status": d.status,
        "attempts": d.attempts, "created_at_ms": d.created_at, "last_attempt_at_ms": d.last_attempt_at,
        "last_status_code": d.last_status_code, "last_error": d.last_error,
        "next_attempt_at_ms": d.next_attempt_at, "finished_at_ms": d.finished_at,
    })
}

fn with_secret(w: &manage::WithSecret) -> Value {
    let mut v = view(&w.endpoint);
    v["secret"] = Value::String(w.secret.clone());
    v
}

pub(crate) async fn run(config: &Config, database_url: &str, action: Action) -> anyhow::Result<()> {
    let store = Store::connect(database_url, 2).await?;
    let options = config.webhooks.options();
    let cli = &baton_coordinator::audit::Actor::cli();
    let out = match action {
        Action::Create { project, url, event_type } => {
            let ring = config.key_ring()?;
            store.note_payload_key(ring.sealing_key_id(), baton_proto::clock::now_ms()).await?;
            with_secret(&manage::create(&store, &ring, &options, cli, &project, &url, &event_type).await?)
        }
        Action::List { project } => {
            json!({ "items": store.webhooks(&project).await?.iter().map(view).collect::<Vec<_>>() })
        }
        Action::Disable { id } => {
            view(&manage::set_enabled(&store, cli, &manage::get(&store, &id).await?, false).await?)
        }
        Action::Enable { id } => view(&manage::set_enabled(&store, cli, &manage::get(&store, &id).await?, true).await?),
        Action::Delete { id } => {
            manage::delete(&store, cli, &manage::get(&store, &id).await?).await?;
            json!({ "deleted": id })
        }
        Action::RotateSecret { id } => {
            let ring = config.key_ring()?;
            store.note_payload_key(ring.sealing_key_id(), baton_proto::clock::now_ms()).await?;
            let endpoint = manage::get(&store, &id).await?;
            with_secret(&manage::rotate(&store, &ring, &options, cli, &endpoint).await?)
        }
        Action::Deliveries { id, limit } => {
            let endpoint = manage::get(&store, &id).await?;
            let found = manage::deliveries(&store, &endpoint.id, limit).await?;
            json!({ "items": found.iter().map(delivery).collect::<Vec<_>>() })
        }
    };
    store.close().await;
    println!("{out}");
    Ok(())
}

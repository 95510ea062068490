//! `baton admin …`: identity management against a deployment's database.
//! Prints one JSON object per command; tokens are shown once.

use baton_coordinator::admin;
use baton_coordinator::authz::Role;
use baton_coordinator::store::Store;
use clap::Subcommand;
use serde_json::json;

#[derive(Subcommand)]
pub enum Action {
    CreateOrg {
        #[arg(long)]
        name: String,
    },
    CreateProject {
        #[arg(long)]
        org: String,
        #[arg(long)]
        name: String,
    },
    CreateGateway {
        #[arg(long)]
        project: String,
        #[arg(long)]
        name: String,
    },
    /// An end-user token bound to (project, gateway, user).
    CreateEndUserToken {
        #[arg(long)]
        gateway: String,
        #[arg(long)]
        user: String,
    },
    /// A project API key with a role; operator permissions are granted separately.
    CreateApiKey {
        #[arg(long)]
        project: String,
        /// admin | member | read_only
        #[arg(long)]
        role: String,
        /// Comma list of status,payload,cancel.
        #[arg(long, default_value = "")]
        permissions: String,
    },
    CreateWorkerToken {
        #[arg(long)]
        project: String,
    },
    Revoke {
        #[arg(long)]
        id: String,
    },
}

pub async fn run(database_url: &str, action: Action) -> anyhow::Result<()> {
    let store = Store::connect(database_url, 2).await?;
    let out = match action {
        Action::CreateOrg { name } => json!({ "id": admin::create_org(&store, &name).await? }),
        Action::CreateProject { org, name } => json!({ "id": admin::create_project(&store, &org, &name).await? }),
        Action::CreateGateway { project, name } => {
            json!({ "id": admin::create_gateway(&store, &project, &name).await? })
        }
        Action::CreateEndUserToken { gateway, user } => {
            serde_json::to_value(admin::issue_end_user_token(&store, &gateway, &user).await?)?
        }
        Action::CreateApiKey { project, role, permissions } => {
            let role =
                Role::parse(&role).ok_or_else(|| anyhow::anyhow!("--role must be admin, member or read_only"))?;
            let permissions: Vec<String> =
                permissions.split(',').map(str::trim).filter(|p| !p.is_empty()).map(str::to_owned).collect();
            serde_json::to_value(admin::issue_api_key(&store, &project, role, &permissions).await?)?
        }
        Action::CreateWorkerToken { project } => {
            serde_json::to_value(admin::issue_worker_token(&store, &project).await?)?
        }
        Action::Revoke { id } => {
            admin::revoke(&store, &id).await?;
            json!({ "revoked": id })
        }
    };
    store.close().await;
    println!("{out}");
    Ok(())
}

//! `baton admin …`: identity management against a deployment's database.
//! Prints one JSON object per command; tokens are shown once.

use baton_coordinator::authz::Role;
use baton_coordinator::store::Store;
use baton_coordinator::{admin, people};
use clap::{Subcommand, ValueEnum};
use serde_json::json;

/// A project API key's role.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum RoleArg {
    /// Everything in the project, payloads of the history included.
    Admin,
    /// Starts executions and reads the history, without payloads.
    Member,
    /// Reads only what the key's permissions allow; never acts.
    #[value(name = "read_only", alias = "read-only")]
    ReadOnly,
}

impl From<RoleArg> for Role {
    fn from(r: RoleArg) -> Role {
        match r {
            RoleArg::Admin => Role::Admin,
            RoleArg::Member => Role::Member,
            RoleArg::ReadOnly => Role::ReadOnly,
        }
    }
}

/// A person's role in a project (`grant-role`).
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PersonRoleArg {
    /// Everything in the project, payloads of the history included.
    Admin,
    /// A member who also sees deadlines and cancels any run.
    Operator,
    /// Reads the history, without payloads.
    Member,
    /// Reads the history; never acts.
    #[value(name = "read_only", alias = "read-only")]
    ReadOnly,
}

impl From<PersonRoleArg> for people::PersonRole {
    fn from(r: PersonRoleArg) -> people::PersonRole {
        match r {
            PersonRoleArg::Admin => people::PersonRole::Admin,
            PersonRoleArg::Operator => people::PersonRole::Operator,
            PersonRoleArg::Member => people::PersonRole::Member,
            PersonRoleArg::ReadOnly => people::PersonRole::ReadOnly,
        }
    }
}

/// Whom a role grant names: an email address or a group of the OpenID provider.
#[derive(Clone, Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub(crate) struct GranteeArg {
    /// A person's email address (compared without regard to case).
    #[arg(long)]
    email: Option<String>,
    /// A group, as the provider's groups claim spells it.
    #[arg(long)]
    group: Option<String>,
}

impl GranteeArg {
    fn grantee(&self) -> Result<people::Grantee, people::Error> {
        match (&self.email, &self.group) {
            (Some(e), _) => people::Grantee::email(e),
            (None, Some(g)) => people::Grantee::group(g),
            (None, None) => Err(people::Error::Invalid("name --email or --group")),
        }
    }
}

/// An operator permission on a project API key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum PermissionArg {
    /// Status of any execution of the project (never a payload).
    Status,
    /// Input and result of any execution.
    Payload,
    /// Cancel any execution (not with a read-only key).
    Cancel,
}

impl PermissionArg {
    fn as_str(self) -> &'static str {
        match self {
            PermissionArg::Status => "status",
            PermissionArg::Payload => "payload",
            PermissionArg::Cancel => "cancel",
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum Action {
    /// Creates an organization; prints its id (org_…).
    CreateOrg {
        #[arg(long)]
        name: String,
    },
    /// Creates a project in an organization; prints its id (prj_…).
    CreateProject {
        /// The organization id.
        #[arg(long)]
        org: String,
        #[arg(long)]
        name: String,
    },
    /// Creates a gateway of a project (MCP is served at /mcp/{id}); prints its id (gw_…).
    CreateGateway {
        /// The project id.
        #[arg(long)]
        project: String,
        #[arg(long)]
        name: String,
    },
    /// An end-user token bound to (project, gateway, user).
    CreateEndUserToken {
        /// The gateway id.
        #[arg(long)]
        gateway: String,
        /// The user the token acts for (1 to 512 characters).
        #[arg(long)]
        user: String,
    },
    /// A project API key with a role; operator permissions are granted separately.
    CreateApiKey {
        /// The project id.
        #[arg(long)]
        project: String,
        #[arg(long, value_enum)]
        role: RoleArg,
        /// Operator permissions, comma-separated (e.g. status,cancel).
        #[arg(long, value_enum, value_delimiter = ',')]
        permissions: Vec<PermissionArg>,
    },
    /// The token a project's workers present (BATON_WORKER__TOKEN). Alone it is
    /// a new worker identity; the tools it registers first are its own.
    CreateWorkerToken {
        /// The project id.
        #[arg(long)]
        project: String,
        /// Another token of the identity of this live worker token (cred_…), to
        /// rotate tokens: both work until the old one is revoked.
        #[arg(long)]
        same_as: Option<String>,
    },
    /// Revokes a credential by its id (cred_…); sessions holding it end.
    Revoke {
        #[arg(long)]
        id: String,
    },
    /// Lists organizations.
    ListOrgs {
        /// One JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Lists projects, all or one organization's.
    ListProjects {
        /// Only this organization's.
        #[arg(long)]
        org: Option<String>,
        /// One JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Lists gateways, all or one project's.
    ListGateways {
        /// Only this project's.
        #[arg(long)]
        project: Option<String>,
        /// One JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Lists credentials (never their tokens), revoked ones included and marked.
    ListCredentials {
        /// Only this project's.
        #[arg(long)]
        project: Option<String>,
        /// One JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Sets how long executions are kept: an organization's default (--org)
    /// or a project's override (--project). Rows it governs are re-dated at once.
    SetRetention {
        #[arg(long, conflicts_with = "project", required_unless_present = "project")]
        org: Option<String>,
        #[arg(long)]
        project: Option<String>,
        /// The window in days (fractions allowed, 0 keeps a record only until its deadline).
        #[arg(long, conflicts_with = "clear", required_unless_present = "clear")]
        days: Option<f64>,
        /// Removes the setting, so the organization's (or the configured) default applies.
        #[arg(long)]
        clear: bool,
    },
    /// Turns execution logging off for an organization, deleting its history,
    /// or (with --on) back on.
    ExecutionLogging {
        #[arg(long)]
        org: String,
        #[arg(long, conflicts_with = "off", required_unless_present = "off")]
        on: bool,
        #[arg(long)]
        off: bool,
    },
    /// Disables a project's tool: it starts nothing and takes no input or cancellation.
    DisableTool {
        #[arg(long)]
        project: String,
        #[arg(long)]
        tool: String,
    },
    EnableTool {
        #[arg(long)]
        project: String,
        #[arg(long)]
        tool: String,
    },
    /// Gives a project's tool to the worker identity of a worker token; the
    /// previous owner's workers stop serving it.
    TransferTool {
        #[arg(long)]
        project: String,
        #[arg(long)]
        tool: String,
        /// A live worker token (cred_…) of the identity that takes the tool.
        #[arg(long)]
        to: String,
    },
    /// Grants a person (by email) or an IdP group a role in a project, for
    /// dashboard sign-in with the OpenID provider; replaces the role it held.
    GrantRole {
        #[arg(long)]
        project: String,
        #[command(flatten)]
        who: GranteeArg,
        #[arg(long, value_enum)]
        role: PersonRoleArg,
    },
    /// Revokes a grant: the person's next dashboard request is decided without it.
    RevokeRole {
        #[arg(long)]
        project: String,
        #[command(flatten)]
        who: GranteeArg,
    },
    /// Lists a project's role grants.
    ListRoles {
        #[arg(long)]
        project: String,
    },
    /// A project's webhook endpoints (`baton admin webhook --help`).
    #[command(subcommand)]
    Webhook(crate::admin_webhooks::Action),
    /// Retiring payload keys (`baton admin payload-keys --help`).
    #[command(subcommand)]
    PayloadKeys(crate::admin_keys::Action),
}

/// Days as milliseconds; refuses what is not a finite, non-negative number.
fn days_ms(days: f64) -> anyhow::Result<i64> {
    if !days.is_finite() || days < 0.0 {
        anyhow::bail!("--days must be a non-negative number");
    }
    Ok((days * 86_400_000.0).round() as i64)
}

pub(crate) async fn run(database_url: &str, default_retention_ms: i64, action: Action) -> anyhow::Result<()> {
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
            let mut named: Vec<String> = Vec::new();
            for p in permissions.iter().map(|p| p.as_str().to_owned()) {
                if !named.contains(&p) {
                    named.push(p);
                }
            }
            let permissions = named;
            serde_json::to_value(admin::issue_api_key(&store, &project, role.into(), &permissions).await?)?
        }
        Action::CreateWorkerToken { project, same_as } => {
            serde_json::to_value(admin::issue_worker_token(&store, &project, same_as.as_deref()).await?)?
        }
        Action::Revoke { id } => {
            admin::revoke(&store, &id).await?;
            json!({ "revoked": id })
        }
        Action::SetRetention { org, project, days, clear: _ } => {
            let ms = days.map(days_ms).transpose()?;
            let scope = match (&org, &project) {
                (_, Some(p)) => admin::RetentionScope::Project(p),
                (Some(o), None) => admin::RetentionScope::Organization(o),
                (None, None) => anyhow::bail!("name --org or --project"),
            };
            admin::set_retention(&store, scope, ms, default_retention_ms).await?;
            json!({ "org": org, "project": project, "retention_ms": ms })
        }
        Action::ExecutionLogging { org, on, off: _ } => {
            admin::set_execution_logging(&store, &org, on, default_retention_ms).await?;
            json!({ "org": org, "execution_logging": on })
        }
        Action::DisableTool { project, tool } => {
            admin::set_tool_disabled(&store, &project, &tool, true).await?;
            json!({ "project": project, "tool": tool, "disabled": true })
        }
        Action::EnableTool { project, tool } => {
            admin::set_tool_disabled(&store, &project, &tool, false).await?;
            json!({ "project": project, "tool": tool, "disabled": false })
        }
        Action::TransferTool { project, tool, to } => {
            admin::transfer_tool(&store, &project, &tool, &to).await?;
            json!({ "project": project, "tool": tool, "owner_of": to })
        }
        Action::GrantRole { project, who, role } => {
            let who = who.grantee()?;
            people::grant_role(&store, &project, &who, role.into()).await?;
            json!({ "project": project, who.kind(): who.subject(), "role": people::PersonRole::from(role).as_str() })
        }
        Action::RevokeRole { project, who } => {
            let who = who.grantee()?;
            let revoked = people::revoke_role(&store, &project, &who).await?;
            json!({ "project": project, who.kind(): who.subject(), "revoked": revoked })
        }
        Action::ListRoles { project } => {
            let grants = people::list_roles(&store, &project).await?;
            let rows: Vec<serde_json::Value> = grants
                .iter()
                .map(|g| json!({ g.subject_kind.as_str(): g.subject, "role": g.role, "granted_at_ms": g.granted_at }))
                .collect();
            json!({ "project": project, "grants": rows })
        }
        Action::ListOrgs { json } => listed(json, crate::admin_lists::orgs(&store).await?),
        Action::ListProjects { org, json } => listed(json, crate::admin_lists::projects(&store, org.as_deref()).await?),
        Action::ListGateways { project, json } => {
            listed(json, crate::admin_lists::gateways(&store, project.as_deref()).await?)
        }
        Action::ListCredentials { project, json } => {
            listed(json, crate::admin_lists::credentials(&store, project.as_deref()).await?)
        }
        // They need the configuration: `main` runs them with `admin_webhooks::run`.
        Action::Webhook(_) => anyhow::bail!("webhook commands run through admin_webhooks"),
        Action::PayloadKeys(_) => anyhow::bail!("payload-keys commands run through admin_keys"),
    };
    store.close().await;
    match out {
        // A table (every other answer is a JSON object or array).
        serde_json::Value::String(table) => println!("{table}"),
        json => println!("{json}"),
    }
    Ok(())
}

/// A list as a table (a JSON string, printed bare), or (`--json`) as one JSON array.
fn listed(json: bool, list: crate::admin_lists::Listing) -> serde_json::Value {
    if json { list.json } else { serde_json::Value::String(list.table) }
}

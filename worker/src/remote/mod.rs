//! Remote MCP servers served through a worker (issue #7). At start the worker
//! discovers each configured server's tools (either task dialect) and
//! registers them with `remote: true`; an assignment of such a tool is run by
//! a [`driver`] that speaks MCP to the server and relays task correlation,
//! input and progress to the coordinator.
//!
//! | module | what |
//! | --- | --- |
//! | `config` | `RemoteServer` (`worker.remote_servers`), secrets redacted |
//! | `transport` | Streamable HTTP: JSON or SSE answers, error classes |
//! | `client` | the MCP client: discovery, sessions, envelopes, headers |
//! | `task` | both dialects' task shapes; the recorded correlation |
//! | `link`, `driver` | one attempt: call or resume, record, poll, relay, settle |
//! | `example_server` | an example remote server speaking both dialects |

pub mod client;
pub mod config;
pub(crate) mod driver;
pub mod example_server;
pub mod link;
pub mod task;
pub mod transport;

pub use config::{Protocol, RemoteServer, Secret};

use crate::sdk::{Background, ToolSpec};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A tool of a remote server, as this worker registers and runs it.
#[derive(Clone, Debug)]
pub struct RemoteTool {
    pub spec: ToolSpec,
    /// The name the server knows it by.
    pub remote_name: String,
    pub client: Arc<client::Client>,
    /// Called as a task (the server creates tasks and the tool allows them).
    pub as_task: bool,
}

/// The registration policy a server's task support implies.
fn policy(c: &client::Client, t: &client::ToolInfo) -> (Background, bool) {
    if !c.tasks {
        return (Background::Forbidden, false);
    }
    let background = match (c.dialect, t.task_support.as_deref()) {
        (_, Some("required")) => Background::Required,
        (_, Some("optional")) => Background::Optional,
        (client::Dialect::V2025, _) | (_, Some("forbidden")) => Background::Forbidden,
        // 2026-07-28 dropped per-tool task support: the server decides per call.
        (client::Dialect::V2026, None) => Background::Optional,
        (client::Dialect::V2026, Some(_)) => Background::Optional,
    };
    (background, background != Background::Forbidden)
}

/// Connects to one server and lists the tools it exposes here.
pub async fn discover(server: &RemoteServer) -> Result<Vec<RemoteTool>, transport::CallError> {
    let client = Arc::new(client::Client::connect(server.clone()).await?);
    let listed = client.list_tools().await?;
    let toolkit_name = server.toolkit_name.clone().unwrap_or_else(|| match client.server_name.as_str() {
        "" => "Remote".to_owned(),
        n => n.to_owned(),
    });
    let toolkit_version = server.toolkit_version.clone().unwrap_or_else(|| match client.server_version.as_str() {
        "" => "0".to_owned(),
        v => v.to_owned(),
    });
    let tools: Vec<RemoteTool> = listed
        .into_iter()
        .filter(|t| server.tools.is_empty() || server.tools.contains(&t.name))
        .map(|t| {
            let (background, as_task) = policy(&client, &t);
            let mut spec = ToolSpec::new(&t.name, &toolkit_name, &toolkit_version)
                .description(&t.description)
                .input_schema(t.input_schema.clone())
                .background(background)
                .task_time_input(as_task);
            // Shown to Baton's callers as the server declared them.
            spec.title = t.title.clone();
            spec.annotations = t.annotations.clone();
            spec.output_schema = t.output_schema.clone();
            spec.icons = t.icons.clone();
            RemoteTool { spec, remote_name: t.name, client: client.clone(), as_task }
        })
        .collect();
    for wanted in &server.tools {
        if !tools.iter().any(|t| &t.remote_name == wanted) {
            tracing::warn!(server = %server.display_url(), tool = %wanted, "configured tool not offered by the remote server");
        }
    }
    tracing::info!(
        server = %server.display_url(),
        dialect = ?client.dialect,
        tasks = client.tasks,
        tools = tools.len(),
        "remote MCP server discovered"
    );
    Ok(tools)
}

/// Discovers every server, retrying each with backoff until it answers or
/// `shutdown` fires (`None` then).
pub async fn discover_all(servers: &[RemoteServer], shutdown: &CancellationToken) -> Option<Vec<RemoteTool>> {
    let mut all = Vec::new();
    for server in servers {
        let mut backoff = Duration::from_millis(200);
        loop {
            match discover(server).await {
                Ok(tools) => {
                    all.extend(tools);
                    break;
                }
                Err(e) => {
                    tracing::warn!(server = %server.display_url(), error = %e, "remote MCP server discovery failed; retrying");
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = shutdown.cancelled() => return None,
            }
            backoff = (backoff * 2).min(Duration::from_secs(10));
        }
    }
    Some(all)
}

//! `baton executions …`: an operator's terminal over the public REST API of a
//! gateway, never the database, so it needs nothing but a URL and an API key
//! and is held to the same authorization as any other caller. `list`, `count`
//! and `get` read the project's execution history; `cancel` takes the operator
//! route (the key needs the `cancel` permission). Tables for people, `--json`
//! (the API's own answer) for scripts.

mod client;
pub(crate) mod table;
mod views;

use baton_proto::coordinator::v1::{ExecutionOutcome, FailureReason};
use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand};
use client::Client;
use std::process::ExitCode;

/// Where the API is and who is asking. Every field falls back to its
/// environment variable; prefer `BATON_API_KEY` to `--api-key`, since flags
/// show in process listings.
#[derive(Args, Debug)]
pub(crate) struct Target {
    /// The gateway's base URL, e.g. http://127.0.0.1:8080.
    #[arg(long, env = "BATON_URL")]
    url: String,
    /// A project API key, sent as the bearer token.
    #[arg(long, env = "BATON_API_KEY", hide_env_values = true)]
    api_key: String,
    /// The organization id (org_…).
    #[arg(long, env = "BATON_ORG")]
    org: String,
    /// The project id (prj_…).
    #[arg(long, env = "BATON_PROJECT")]
    project: String,
    /// Print the API's JSON answer instead of a table.
    #[arg(long)]
    json: bool,
}

/// The history's filters, named as in the API (`tool` is `tool_name`, …).
#[derive(Args, Debug, Default)]
pub(crate) struct Filters {
    /// Only runs of this tool.
    #[arg(long)]
    tool: Option<String>,
    /// Only runs of this toolkit.
    #[arg(long)]
    toolkit: Option<String>,
    /// Only runs for this user id.
    #[arg(long)]
    user: Option<String>,
    /// Only finished runs that succeeded or failed.
    #[arg(long, value_parser = PossibleValuesParser::new(ExecutionOutcome::names()))]
    outcome: Option<String>,
    /// Only failed runs with this reason.
    #[arg(long, value_parser = PossibleValuesParser::new(FailureReason::names()))]
    failure_reason: Option<String>,
    /// Only runs created at or after this RFC 3339 time, e.g. 2026-08-08T00:00:00Z.
    #[arg(long)]
    start_time: Option<String>,
    /// Only runs created at or before this RFC 3339 time.
    #[arg(long)]
    end_time: Option<String>,
}

impl Filters {
    fn query(&self) -> Vec<(&'static str, String)> {
        [
            ("tool_name", &self.tool),
            ("toolkit_name", &self.toolkit),
            ("user_id", &self.user),
            ("outcome", &self.outcome),
            ("failure_reason", &self.failure_reason),
            ("start_time", &self.start_time),
            ("end_time", &self.end_time),
        ]
        .into_iter()
        .filter_map(|(name, v)| v.clone().map(|v| (name, v)))
        .collect()
    }
}

/// Exit codes: 0 when the API answered 200 (for `cancel`, whatever the
/// outcome it reports); 1 for another refusal (400, 409, 5xx…); 3 when the key
/// is not accepted or not allowed (401, 403); 4 for not found (404); 69 when
/// the gateway cannot be reached; 2 for a usage error.
#[derive(Subcommand, Debug)]
pub(crate) enum Action {
    /// Lists the project's executions, newest first (needs an admin or member key).
    List {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        filters: Filters,
        /// Page size (1 to 1000; the API's default is 100).
        #[arg(long)]
        limit: Option<u32>,
        /// How many matching executions to skip.
        #[arg(long)]
        offset: Option<u32>,
    },
    /// Counts the project's executions that match the filters.
    Count {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        filters: Filters,
    },
    /// Shows one execution: timing, timeline, attempts and, when asked (admin
    /// key only), its payloads.
    Get {
        #[command(flatten)]
        target: Target,
        /// The execution id (te_…).
        id: String,
        /// Include the input (needs an admin key; the reveal is audited).
        #[arg(long)]
        include_inputs: bool,
        /// Include the output and each attempt's error detail (needs an admin key; audited).
        #[arg(long)]
        include_outputs: bool,
    },
    /// Requests cancellation through the operator route (needs a key with the
    /// `cancel` permission that is not read-only). Prints the outcome the API
    /// reports (accepted, already_terminal, unsupported, …).
    Cancel {
        #[command(flatten)]
        target: Target,
        /// The execution id (te_…).
        id: String,
    },
}

pub(crate) async fn run(action: Action) -> ExitCode {
    match execute(action).await {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("baton: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// What to print, or why nothing can be.
async fn execute(action: Action) -> Result<String, client::Error> {
    match action {
        Action::List { target, filters, limit, offset } => {
            let client = Client::new(&target)?;
            let mut query = filters.query();
            query.extend(limit.map(|l| ("limit", l.to_string())));
            query.extend(offset.map(|o| ("offset", o.to_string())));
            let page = client.get(&["tool_executions"], &query).await?;
            Ok(if target.json { views::pretty(&page) } else { views::list(&page) })
        }
        Action::Count { target, filters } => {
            let client = Client::new(&target)?;
            let answer = client.get(&["tool_executions", "count"], &filters.query()).await?;
            Ok(if target.json { views::pretty(&answer) } else { answer["count"].to_string() })
        }
        Action::Get { target, id, include_inputs, include_outputs } => {
            let client = Client::new(&target)?;
            let mut query = Vec::new();
            if include_inputs {
                query.push(("include_inputs", "true".to_owned()));
            }
            if include_outputs {
                query.push(("include_outputs", "true".to_owned()));
            }
            let run = client.get(&["tool_executions", &id], &query).await?;
            Ok(if target.json { views::pretty(&run) } else { views::detail(&run) })
        }
        Action::Cancel { target, id } => {
            let client = Client::new(&target)?;
            let answer = client.post(&["operator", "tool-executions", &id, "cancel"]).await?;
            Ok(if target.json { views::pretty(&answer) } else { views::cancelled(&id, &answer) })
        }
    }
}

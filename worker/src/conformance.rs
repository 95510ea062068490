//! Fixture tools of the MCP conformance suite
//! (`@modelcontextprotocol/conformance@0.2.0-alpha.12`) that need no task-time
//! input, served by `baton dev --conformance-fixtures`. Names, arguments and
//! behaviour follow the suite's scenarios. The fixtures that ask for input
//! (`confirm_delete`, `multi_input`, `test_streaming_elicitation`, and
//! `test_tool_with_task` of `tasks-mrtr-composition`: task-required, asks for a
//! `user_name`, greets it) are served by the example remote MCP server
//! (`remote::example_server`), because only a remote tool can ask for input
//! while it runs; `baton dev --conformance-fixtures` registers both sets.
//!
//! | tool | policy | behaviour |
//! | --- | --- | --- |
//! | `greet {name}` | foreground only | `Hello, {name}!` |
//! | `slow_compute {seconds, label}` | may run as a task | sleeps `seconds`, ends `cancelled` when cancelled |
//! | `failing_job {}` | task required | a tool error (`isError: true`) after ~1 s |
//! | `protocol_error_job {}` | task required | fails: the task ends `failed` with an error, no result |
//! | `test_logging_tool {}` | foreground only | reports progress lines; the client asked for no log level, so none may reach it |
//! | `test_missing_capability {}` | foreground only | requires the client's `sampling` capability: the gateway refuses callers without it (-32021); with it, says so |

use crate::sdk::{Background, Context, Failure, Output, Tool, ToolSpec};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

const TOOLKIT: &str = "Conformance";
const VERSION: &str = "0.2.0-alpha.12";

/// Every fixture, `greet` first (clients list tools in registration order).
pub fn all() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(Greet),
        Arc::new(SlowCompute),
        Arc::new(FailingJob),
        Arc::new(ProtocolErrorJob),
        Arc::new(Logging),
        Arc::new(MissingCapability),
    ]
}

fn spec(name: &str) -> ToolSpec {
    ToolSpec::new(name, TOOLKIT, VERSION)
}

fn no_arguments() -> Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

/// Sleeps `d` unless the execution is cancelled first.
async fn sleep_or_cancel(d: Duration, cx: &Context) -> Result<(), Failure> {
    tokio::select! {
        _ = tokio::time::sleep(d) => Ok(()),
        _ = cx.cancel.cancelled() => Err(Failure::Cancelled),
    }
}

pub struct Greet;

#[tonic::async_trait]
impl Tool for Greet {
    fn spec(&self) -> ToolSpec {
        spec("greet")
            .description("Greets someone by name; never runs as a task.")
            .background(Background::Forbidden)
            .input_schema(json!({
                "type": "object",
                "properties": {"name": {"type": "string", "description": "Who to greet."}},
                "required": ["name"]
            }))
    }

    async fn call(&self, input: Value, _cx: Context) -> Result<Output, Failure> {
        let name = input.get("name").and_then(Value::as_str).unwrap_or_default();
        Ok(Output::text(format!("Hello, {name}!")))
    }
}

pub struct SlowCompute;

#[tonic::async_trait]
impl Tool for SlowCompute {
    fn spec(&self) -> ToolSpec {
        spec("slow_compute")
            .description("Sleeps `seconds` (0 returns at once), then reports `label`; honours cancellation.")
            .background(Background::Optional)
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "seconds": {"type": "number", "minimum": 0, "maximum": 3600},
                    "label": {"type": "string"}
                },
                "required": ["seconds"]
            }))
    }

    async fn call(&self, input: Value, cx: Context) -> Result<Output, Failure> {
        let seconds = input.get("seconds").and_then(Value::as_f64).unwrap_or(0.0).clamp(0.0, 3600.0);
        let label = input.get("label").and_then(Value::as_str).unwrap_or("slow_compute").to_owned();
        cx.report_progress(format!("{label}: computing for {seconds} s"));
        sleep_or_cancel(Duration::from_secs_f64(seconds), &cx).await?;
        Ok(Output::text(format!("{label}: done after {seconds} s"))
            .with_structured(json!({"label": label, "seconds": seconds})))
    }
}

pub struct FailingJob;

#[tonic::async_trait]
impl Tool for FailingJob {
    fn spec(&self) -> ToolSpec {
        spec("failing_job")
            .description("Runs only as a task and reports a tool error after about a second.")
            .background(Background::Required)
            .input_schema(no_arguments())
    }

    async fn call(&self, _input: Value, cx: Context) -> Result<Output, Failure> {
        sleep_or_cancel(Duration::from_secs(1), &cx).await?;
        Ok(Output::tool_error("failing_job: the job reported an error, as it always does"))
    }
}

pub struct ProtocolErrorJob;

#[tonic::async_trait]
impl Tool for ProtocolErrorJob {
    fn spec(&self) -> ToolSpec {
        spec("protocol_error_job")
            .description("Runs only as a task and fails outright: the task ends failed with an error and no result.")
            .background(Background::Required)
            .input_schema(no_arguments())
    }

    async fn call(&self, _input: Value, cx: Context) -> Result<Output, Failure> {
        sleep_or_cancel(Duration::from_millis(200), &cx).await?;
        Err(Failure::protocol("protocol_error_job: the job failed before producing a result")
            .with_detail(json!({"developer_message": "conformance fixture; always fails"})))
    }
}

pub struct Logging;

#[tonic::async_trait]
impl Tool for Logging {
    fn spec(&self) -> ToolSpec {
        spec("test_logging_tool")
            .description(
                "Emits a few progress lines and returns; no log message may reach a client that set no log level.",
            )
            .background(Background::Forbidden)
            .input_schema(no_arguments())
    }

    async fn call(&self, _input: Value, cx: Context) -> Result<Output, Failure> {
        for step in 1..=3 {
            cx.report_progress(format!("log line {step} of 3"));
        }
        Ok(Output::text("logged 3 lines"))
    }
}

/// Declares that callers must offer `sampling`; Baton relays no sampling, so
/// the declaration (checked by the gateway) is the whole point of the fixture.
pub struct MissingCapability;

#[tonic::async_trait]
impl Tool for MissingCapability {
    fn spec(&self) -> ToolSpec {
        spec("test_missing_capability")
            .description("Needs a client that declares the sampling capability; others are refused before it runs.")
            .background(Background::Forbidden)
            .requires_client_capability("sampling")
            .input_schema(no_arguments())
    }

    async fn call(&self, _input: Value, _cx: Context) -> Result<Output, Failure> {
        Ok(Output::text("called by a client that declared sampling"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greet_is_listed_first_and_policies_match_the_suite() {
        let specs: Vec<ToolSpec> = all().iter().map(|t| t.spec()).collect();
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "greet",
                "slow_compute",
                "failing_job",
                "protocol_error_job",
                "test_logging_tool",
                "test_missing_capability"
            ]
        );
        assert_eq!(specs[5].required_client_capabilities, ["sampling"]);
        let policy = |n: &str| specs.iter().find(|s| s.name == n).map(|s| s.background);
        assert_eq!(policy("greet"), Some(Background::Forbidden));
        assert_eq!(policy("slow_compute"), Some(Background::Optional));
        assert_eq!(policy("failing_job"), Some(Background::Required));
        assert_eq!(policy("protocol_error_job"), Some(Background::Required));
        assert!(specs.iter().all(|s| !s.task_time_input));
    }

    #[test]
    fn a_tool_error_carries_is_error() {
        let v = Output::tool_error("x").to_json();
        assert_eq!(v["isError"], true);
        assert_eq!(Output::text("x").to_json().get("isError"), None);
    }
}

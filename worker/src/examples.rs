//! Example tools served by `baton dev` and `baton worker --examples`.

use crate::sdk::{Context, Failure, Output, Tool, ToolSpec};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

pub fn all() -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(Echo), Arc::new(Sleep), Arc::new(Fail)]
}

pub struct Echo;

#[tonic::async_trait]
impl Tool for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("Demo.Echo", "Demo", "1.0.0").description("Returns the text it is given.").input_schema(json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "Text to echo back."}},
            "required": ["text"],
            "additionalProperties": false
        }))
    }

    async fn call(&self, input: Value, _cx: Context) -> Result<Output, Failure> {
        let text = input.get("text").and_then(Value::as_str).unwrap_or_default().to_owned();
        Ok(Output::text(text.clone()).with_structured(json!({ "text": text })))
    }
}

pub struct Sleep;

#[tonic::async_trait]
impl Tool for Sleep {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("Demo.Sleep", "Demo", "1.0.0").description("Sleeps, honouring cancellation.").input_schema(
            json!({
                "type": "object",
                "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 86400}},
                "required": ["seconds"],
                "additionalProperties": false
            }),
        )
    }

    async fn call(&self, input: Value, cx: Context) -> Result<Output, Failure> {
        let seconds = input.get("seconds").and_then(Value::as_f64).unwrap_or(0.0).clamp(0.0, 86_400.0);
        cx.report_progress(format!("sleeping {seconds} s"));
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs_f64(seconds)) => {
                Ok(Output::text(format!("slept {seconds} s")).with_structured(json!({"slept_seconds": seconds})))
            }
            _ = cx.cancel.cancelled() => Err(Failure::Cancelled),
        }
    }
}

pub struct Fail;

#[tonic::async_trait]
impl Tool for Fail {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("Demo.Fail", "Demo", "1.0.0")
            .description("Fails `times` times (retryable or not), then succeeds.")
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "retryable": {"type": "boolean"},
                    "times": {"type": "integer", "minimum": 0, "maximum": 100}
                },
                "additionalProperties": false
            }))
            .max_attempts(5)
    }

    async fn call(&self, input: Value, cx: Context) -> Result<Output, Failure> {
        let retryable = input.get("retryable").and_then(Value::as_bool).unwrap_or(false);
        let times = input.get("times").and_then(Value::as_f64).unwrap_or(1.0) as u32;
        if cx.attempt <= times {
            let message = format!("planned failure {} of {times}", cx.attempt);
            let detail = json!({"developer_message": "Demo.Fail always fails its first `times` attempts"});
            let failure = if retryable { Failure::retryable(message) } else { Failure::error(message) };
            return Err(failure.with_detail(detail));
        }
        Ok(Output::text(format!("succeeded on attempt {}", cx.attempt)).with_structured(json!({"attempt": cx.attempt})))
    }
}

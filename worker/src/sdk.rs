//! The tool-author SDK: implement `Tool` (a spec and an async `call`) and hand
//! it to a `Worker`. A tool receives its input, a cancellation signal, its
//! deadline and a progress reporter; it returns MCP-shaped content or a failure.

use baton_proto::worker::v1::BackgroundPolicy;
use serde_json::{Value, json};
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Whether a tool may run in the background (seed 000, execution policy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Background {
    Forbidden,
    Optional,
    Required,
}

impl Background {
    /// The policy as the wire carries it (and `baton_proto::names` spells it).
    pub fn wire(self) -> BackgroundPolicy {
        match self {
            Background::Forbidden => BackgroundPolicy::Forbidden,
            Background::Optional => BackgroundPolicy::Optional,
            Background::Required => BackgroundPolicy::Required,
        }
    }
}

/// What a tool declares about itself. Build with `ToolSpec::new(..)` and the setters.
#[derive(Clone, Debug)]
pub struct ToolSpec {
    pub name: String,
    pub toolkit_name: String,
    pub toolkit_version: String,
    pub description: String,
    pub input_schema: Value,
    pub background: Background,
    /// Hosted tools cannot pause for input; the coordinator refuses such a tool.
    pub task_time_input: bool,
    /// Attempts allowed when the tool reports retryable failures (1 = no retry).
    pub max_attempts: u32,
    pub max_ttl: Option<Duration>,
    /// MCP client capabilities (e.g. `sampling`) a caller must declare; the
    /// gateway refuses other callers before anything runs.
    pub required_client_capabilities: Vec<String>,
}

impl ToolSpec {
    /// `name` is the tool's full name, e.g. `Demo.Echo`.
    pub fn new(name: &str, toolkit_name: &str, toolkit_version: &str) -> Self {
        ToolSpec {
            name: name.to_owned(),
            toolkit_name: toolkit_name.to_owned(),
            toolkit_version: toolkit_version.to_owned(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            background: Background::Optional,
            task_time_input: false,
            max_attempts: 1,
            max_ttl: None,
            required_client_capabilities: Vec::new(),
        }
    }

    pub fn requires_client_capability(mut self, capability: &str) -> Self {
        self.required_client_capabilities.push(capability.to_owned());
        self
    }

    pub fn description(mut self, d: &str) -> Self {
        self.description = d.to_owned();
        self
    }

    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = schema;
        self
    }

    pub fn background(mut self, b: Background) -> Self {
        self.background = b;
        self
    }

    pub fn task_time_input(mut self, yes: bool) -> Self {
        self.task_time_input = yes;
        self
    }

    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    pub fn max_ttl(mut self, ttl: Duration) -> Self {
        self.max_ttl = Some(ttl);
        self
    }
}

/// A result the tool produced: MCP `content` blocks and optional
/// `structuredContent`. `is_error` marks a tool-level error the model should
/// see (`isError: true`): the tool ran and reported a problem, unlike a
/// `Failure`, which ends the execution `failed`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Output {
    pub content: Vec<Value>,
    pub structured: Option<Value>,
    pub is_error: bool,
}

impl Output {
    pub fn text(text: impl Into<String>) -> Self {
        Output { content: vec![json!({"type": "text", "text": text.into()})], structured: None, is_error: false }
    }

    /// A tool-level error result (`isError: true`) with one text block.
    pub fn tool_error(text: impl Into<String>) -> Self {
        Output { is_error: true, ..Output::text(text) }
    }

    pub fn with_structured(mut self, v: Value) -> Self {
        self.structured = Some(v);
        self
    }

    pub fn to_json(&self) -> Value {
        let mut v = json!({"content": self.content});
        if let Some(s) = &self.structured {
            v["structuredContent"] = s.clone();
        }
        if self.is_error {
            v["isError"] = true.into();
        }
        v
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// The tool failed. `retryable` promises no side effect happened. `message`
    /// is shown to every reader; `detail` (developer message, extra fields,
    /// stack) is stored encrypted with the payload.
    Error { message: String, retryable: bool, detail: Value },
    /// The tool stopped because it was asked to.
    Cancelled,
}

impl Failure {
    pub fn error(message: impl Into<String>) -> Self {
        Failure::Error { message: message.into(), retryable: false, detail: Value::Null }
    }

    pub fn retryable(message: impl Into<String>) -> Self {
        Failure::Error { message: message.into(), retryable: true, detail: Value::Null }
    }

    pub fn with_detail(self, detail: Value) -> Self {
        match self {
            Failure::Error { message, retryable, .. } => Failure::Error { message, retryable, detail },
            Failure::Cancelled => Failure::Cancelled,
        }
    }
}

/// What a running tool can see and use.
#[derive(Clone, Debug)]
pub struct Context {
    pub execution_id: String,
    pub attempt: u32,
    /// Fires when the execution is cancelled or its deadline passes.
    pub cancel: CancellationToken,
    pub deadline: SystemTime,
    pub(crate) progress: mpsc::UnboundedSender<(String, u32, String)>,
}

impl Context {
    pub fn report_progress(&self, message: impl Into<String>) {
        let _ = self.progress.send((self.execution_id.clone(), self.attempt, message.into()));
    }
}

#[tonic::async_trait]
pub trait Tool: Send + Sync + 'static {
    fn spec(&self) -> ToolSpec;
    async fn call(&self, input: Value, cx: Context) -> Result<Output, Failure>;
}

//! The tool-author SDK. A tool is either typed ([`TypedTool`]: its input is a
//! Rust type whose JSON Schema is generated, its output optionally too) or
//! untyped ([`Tool`]: a hand-written schema and a `serde_json::Value`, for
//! tools whose shape is only known at run time). Either is served with
//! [`crate::serve()`] or a [`crate::Worker`]. A tool receives its input, a
//! cancellation signal, its deadline and a progress reporter ([`Context`]); it
//! returns MCP-shaped content or a [`Failure`]. Tools are unit-tested with
//! [`crate::testing::TestContext`].

use baton_proto::worker::v1::BackgroundPolicy;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
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
    /// The tool cannot be stopped once started: callers asking to cancel it
    /// are told `unsupported`, and the tool is never asked to stop.
    pub cancel_unsupported: bool,
    /// MCP `title`: a human-readable name clients show instead of `name`.
    pub title: Option<String>,
    /// MCP `annotations` (a JSON object of behaviour hints).
    pub annotations: Option<Value>,
    /// MCP `outputSchema`: the JSON Schema `structuredContent` follows.
    pub output_schema: Option<Value>,
    /// MCP `icons`, each a JSON object (`src`, `mimeType`, `sizes`).
    pub icons: Vec<Value>,
}

/// MCP tool annotations: hints about how a tool behaves, which clients may use
/// to decide whether to ask a person first. Hints, not guarantees.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool does not change its environment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may destroy or overwrite something (meaningful when not read-only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling it again with the same input has no further effect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// It reaches an open world of outside entities (the web, other people).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// An MCP icon a client may show next to the tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Icon {
    /// An `https:` or `data:` URI.
    pub src: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// E.g. `["48x48"]`, or `["any"]` for scalable formats.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sizes: Vec<String>,
}

impl Icon {
    pub fn new(src: impl Into<String>) -> Self {
        Icon { src: src.into(), mime_type: None, sizes: Vec::new() }
    }

    pub fn mime_type(mut self, mime: impl Into<String>) -> Self {
        self.mime_type = Some(mime.into());
        self
    }

    pub fn size(mut self, size: impl Into<String>) -> Self {
        self.sizes.push(size.into());
        self
    }
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
            cancel_unsupported: false,
            title: None,
            annotations: None,
            output_schema: None,
            icons: Vec::new(),
        }
    }

    /// MCP `title`, shown by clients instead of the name.
    pub fn title(mut self, title: &str) -> Self {
        self.title = Some(title.to_owned());
        self
    }

    /// MCP behaviour hints (read-only, destructive, idempotent, open world).
    pub fn annotations(mut self, annotations: ToolAnnotations) -> Self {
        // A struct of options and strings always serializes.
        self.annotations = serde_json::to_value(annotations).ok();
        self
    }

    /// An MCP icon; call again for more sizes or formats.
    pub fn icon(mut self, icon: Icon) -> Self {
        if let Ok(v) = serde_json::to_value(icon) {
            self.icons.push(v);
        }
        self
    }

    /// The JSON Schema of `structuredContent` (typed tools get it from their output type).
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Declares that the tool cannot be stopped once started (a payment, a
    /// deployment): a cancel answers `unsupported` instead of asking it to stop.
    pub fn cancel_unsupported(mut self) -> Self {
        self.cancel_unsupported = true;
        self
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
    /// The tool's server could not handle the call at all (what MCP answers
    /// with a JSON-RPC error rather than a tool result): MCP callers get a
    /// protocol error, and the attempt is never retried. A tool's own
    /// failure, which a model should read, is [`Failure::Error`].
    Protocol { message: String, detail: Value },
    /// The tool stopped because it was asked to.
    Cancelled,
}

impl Failure {
    pub fn protocol(message: impl Into<String>) -> Self {
        Failure::Protocol { message: message.into(), detail: Value::Null }
    }

    pub fn error(message: impl Into<String>) -> Self {
        Failure::Error { message: message.into(), retryable: false, detail: Value::Null }
    }

    pub fn retryable(message: impl Into<String>) -> Self {
        Failure::Error { message: message.into(), retryable: true, detail: Value::Null }
    }

    pub fn with_detail(self, detail: Value) -> Self {
        match self {
            Failure::Error { message, retryable, .. } => Failure::Error { message, retryable, detail },
            Failure::Protocol { message, .. } => Failure::Protocol { message, detail },
            Failure::Cancelled => Failure::Cancelled,
        }
    }
}

/// One progress report: `current` of `total` (when known), and what the tool
/// is doing. MCP progress numbers: they need not be integers.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub current: f64,
    pub total: Option<f64>,
    pub message: String,
}

/// Where a context's progress goes: the worker's session, or a test's record.
pub(crate) type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// What a running tool can see and use. Built by the worker for each attempt,
/// or by [`crate::testing::TestContext`] in a unit test.
#[derive(Clone)]
pub struct Context {
    pub execution_id: String,
    /// 1 for the first attempt; higher when an earlier attempt failed retryably.
    pub attempt: u32,
    /// Fires when the execution is cancelled or its deadline passes.
    pub cancel: CancellationToken,
    pub deadline: SystemTime,
    pub(crate) progress: ProgressSink,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("execution_id", &self.execution_id).field("attempt", &self.attempt).finish()
    }
}

impl Context {
    /// Reports how far the tool is: `current` of `total` (`None`: unknown).
    /// Callers see the latest report on the execution (REST `progress`, MCP
    /// `statusMessage` and `notifications/progress`). Cheap to call often:
    /// reports are coalesced before they leave the worker.
    pub fn progress(&self, current: f64, total: Option<f64>, message: impl Into<String>) {
        (self.progress)(Progress { current, total, message: message.into() });
    }

    /// Reports what the tool is doing, without numbers.
    pub fn report_progress(&self, message: impl Into<String>) {
        (self.progress)(Progress { current: 0.0, total: None, message: message.into() });
    }

    /// True once the execution was cancelled (or its deadline passed).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Resolves when the execution is cancelled (or its deadline passes): race
    /// it against the work with `tokio::select!`.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }
}

/// An untyped tool: a hand-written input schema and a JSON value in. For tools
/// whose shape is known at compile time, prefer [`TypedTool`].
///
/// Implement it with [`crate::async_trait`] (re-exported, so a tool crate
/// needs no other dependency for it):
///
/// ```
/// use baton_worker::{Context, Failure, Output, Tool, ToolSpec};
/// use serde_json::{Value, json};
///
/// struct Shout;
///
/// #[baton_worker::async_trait]
/// impl Tool for Shout {
///     fn spec(&self) -> ToolSpec {
///         ToolSpec::new("Demo.Shout", "Demo", "1.0.0").input_schema(json!({
///             "type": "object",
///             "properties": {"text": {"type": "string"}},
///             "required": ["text"]
///         }))
///     }
///
///     async fn call(&self, input: Value, _cx: Context) -> Result<Output, Failure> {
///         Ok(Output::text(input["text"].as_str().unwrap_or_default().to_uppercase()))
///     }
/// }
/// ```
#[tonic::async_trait]
pub trait Tool: Send + Sync + 'static {
    fn spec(&self) -> ToolSpec;
    async fn call(&self, input: Value, cx: Context) -> Result<Output, Failure>;
}

/// A typed tool. `Input` derives `Deserialize` and `JsonSchema`: its schema is
/// the tool's `inputSchema`, the coordinator validates every call against it,
/// and the tool receives the value already deserialized. `Output` is either
/// [`Output`] (content blocks, no schema) or [`Json<T>`] (a `Serialize +
/// JsonSchema` struct: `outputSchema` plus `structuredContent`).
///
/// ```
/// use baton_worker::{Context, Failure, Json, ToolSpec, TypedTool};
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Add {
///     a: i64,
///     b: i64,
/// }
///
/// #[derive(Serialize, JsonSchema)]
/// struct Sum {
///     sum: i64,
/// }
///
/// struct Adder;
///
/// impl TypedTool for Adder {
///     type Input = Add;
///     type Output = Json<Sum>;
///
///     fn spec(&self) -> ToolSpec {
///         ToolSpec::new("Math.Add", "Math", "1.0.0").title("Add two numbers")
///     }
///
///     async fn call(&self, input: Add, _cx: Context) -> Result<Json<Sum>, Failure> {
///         Ok(Json(Sum { sum: input.a + input.b }))
///     }
/// }
///
/// let tool = baton_worker::typed(Adder);
/// assert_eq!(tool.spec().input_schema["required"], serde_json::json!(["a", "b"]));
/// assert!(tool.spec().output_schema.is_some());
/// ```
pub trait TypedTool: Send + Sync + 'static {
    type Input: DeserializeOwned + schemars::JsonSchema + Send + 'static;
    type Output: ToolOutput;
    /// The tool's name, toolkit, policies and MCP metadata; the input and
    /// output schemas are filled in from the types.
    fn spec(&self) -> ToolSpec;
    fn call(&self, input: Self::Input, cx: Context) -> impl Future<Output = Result<Self::Output, Failure>> + Send;
}

/// What a typed tool may return.
pub trait ToolOutput: Send + 'static {
    /// The `outputSchema` this output type promises, if any.
    fn output_schema() -> Option<Value>;
    fn into_output(self) -> Result<Output, Failure>;
}

impl ToolOutput for Output {
    fn output_schema() -> Option<Value> {
        None
    }

    fn into_output(self) -> Result<Output, Failure> {
        Ok(self)
    }
}

/// A structured result: `structuredContent` is `T` as JSON (an object, so `T`
/// should be a struct), also given as a text block for clients that read only
/// `content`; `outputSchema` is generated from `T`.
#[derive(Clone, Debug, PartialEq)]
pub struct Json<T>(pub T);

impl<T: Serialize + schemars::JsonSchema + Send + 'static> ToolOutput for Json<T> {
    fn output_schema() -> Option<Value> {
        Some(schema_of::<T>())
    }

    fn into_output(self) -> Result<Output, Failure> {
        let value = serde_json::to_value(&self.0).map_err(|e| {
            Failure::error("the tool's result could not be encoded").with_detail(json!({"error": e.to_string()}))
        })?;
        Ok(Output::text(value.to_string()).with_structured(value))
    }
}

/// The JSON Schema (draft 2020-12) of `T`, as MCP tool listings carry it.
pub fn schema_of<T: schemars::JsonSchema>() -> Value {
    let mut schema = schemars::schema_for!(T).to_value();
    if let Some(map) = schema.as_object_mut() {
        // Clients show the tool's own title; the Rust type's name is noise there.
        map.remove("title");
    }
    schema
}

/// Serves a [`TypedTool`] wherever a [`Tool`] is expected.
pub fn typed<T: TypedTool>(tool: T) -> Arc<dyn Tool> {
    Arc::new(Typed(tool))
}

struct Typed<T>(T);

#[tonic::async_trait]
impl<T: TypedTool> Tool for Typed<T> {
    fn spec(&self) -> ToolSpec {
        let mut spec = self.0.spec();
        spec.input_schema = schema_of::<T::Input>();
        if let Some(schema) = T::Output::output_schema() {
            spec.output_schema = Some(schema);
        }
        spec
    }

    async fn call(&self, input: Value, cx: Context) -> Result<Output, Failure> {
        // The coordinator validated `input` against the schema; this fails only
        // where serde is stricter than the schema says.
        let input = serde_json::from_value::<T::Input>(input)
            .map_err(|e| Failure::error(format!("the input does not match the tool's input type: {e}")))?;
        self.0.call(input, cx).await?.into_output()
    }
}

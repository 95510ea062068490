//! The two tools: `Hello.Greet` reports progress as it works, and
//! `Hello.Countdown` stops as soon as it is cancelled.

use baton_worker::{
    Context, Failure, Json, Output, Tool, ToolAnnotations, ToolSpec, TypedTool, schemars::JsonSchema, typed,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

pub(crate) fn all() -> Vec<Arc<dyn Tool>> {
    vec![typed(Greet), typed(Countdown)]
}

/// Whom to greet: a name, or a number of people.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum Recipient {
    Name(String),
    Crowd(u32),
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GreetInput {
    /// A name ("Ada") or a number of people (3).
    pub to: Recipient,
    /// A language tag such as `en` or `fr-CA`; English when left out.
    #[schemars(regex(pattern = r"^[a-z]{2}(-[A-Z]{2})?$"))]
    pub language: Option<String>,
    /// Milliseconds to spend on each of the five steps (at most 2000).
    #[schemars(range(max = 2000))]
    #[serde(default)]
    pub step_ms: u64,
}

#[derive(Debug, PartialEq, Serialize, JsonSchema)]
pub(crate) struct Greeting {
    pub greeting: String,
}

const STEPS: u32 = 5;

pub(crate) struct Greet;

impl TypedTool for Greet {
    type Input = GreetInput;
    type Output = Json<Greeting>;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new("Hello.Greet", "Hello", "1.0.0")
            .title("Greet someone")
            .description("Composes a greeting in five steps, reporting progress after each.")
            .annotations(ToolAnnotations { read_only_hint: Some(true), ..Default::default() })
    }

    async fn call(&self, input: GreetInput, cx: Context) -> Result<Json<Greeting>, Failure> {
        for step in 1..=STEPS {
            if cx.is_cancelled() {
                return Err(Failure::Cancelled);
            }
            tokio::time::sleep(Duration::from_millis(input.step_ms.min(2_000))).await;
            cx.progress(f64::from(step), Some(f64::from(STEPS)), format!("step {step} of {STEPS}"));
        }
        let hello = match input.language.as_deref() {
            Some(l) if l.starts_with("fr") => "Bonjour",
            Some(l) if l.starts_with("de") => "Hallo",
            _ => "Hello",
        };
        let greeting = match input.to {
            Recipient::Name(name) => format!("{hello}, {name}!"),
            Recipient::Crowd(1) => format!("{hello}, you!"),
            Recipient::Crowd(n) => format!("{hello}, all {n} of you!"),
        };
        Ok(Json(Greeting { greeting }))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CountdownInput {
    /// Seconds to count down from (at most one hour).
    #[schemars(range(min = 0, max = 3600))]
    pub seconds: u32,
}

pub(crate) struct Countdown;

impl TypedTool for Countdown {
    type Input = CountdownInput;
    type Output = Output;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new("Hello.Countdown", "Hello", "1.0.0")
            .title("Count down")
            .description("Counts down one second at a time; stops at once when cancelled.")
            .background(baton_worker::Background::Required)
    }

    async fn call(&self, input: CountdownInput, cx: Context) -> Result<Output, Failure> {
        for left in (1..=input.seconds).rev() {
            cx.progress(f64::from(input.seconds - left), Some(f64::from(input.seconds)), format!("{left} s left"));
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
                () = cx.cancelled() => return Err(Failure::Cancelled),
            }
        }
        Ok(Output::text("liftoff"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_worker::testing::TestContext;
    use serde_json::json;

    fn greet(input: serde_json::Value) -> GreetInput {
        serde_json::from_value(input).expect("valid input")
    }

    #[tokio::test]
    async fn greets_by_name_and_reports_each_step() {
        let test = TestContext::new();
        let out = Greet.call(greet(json!({"to": "Ada", "language": "fr-CA"})), test.context()).await;
        assert_eq!(out, Ok(Json(Greeting { greeting: "Bonjour, Ada!".into() })));
        let progress = test.progress();
        assert_eq!(progress.len(), 5);
        assert_eq!((progress[4].current, progress[4].total), (5.0, Some(5.0)));
        assert_eq!(progress[0].message, "step 1 of 5");
    }

    #[tokio::test]
    async fn greets_a_crowd() {
        let out = Greet.call(greet(json!({"to": 3})), TestContext::new().context()).await;
        assert_eq!(out, Ok(Json(Greeting { greeting: "Hello, all 3 of you!".into() })));
    }

    #[tokio::test]
    async fn countdown_stops_when_cancelled() {
        let test = TestContext::new();
        let cx = test.context();
        let running = tokio::spawn(async move { Countdown.call(CountdownInput { seconds: 3_600 }, cx).await });
        test.cancel();
        let out = running.await.expect("the tool task ends");
        assert_eq!(out, Err(Failure::Cancelled));
        assert!(test.is_cancelled());
    }

    #[tokio::test]
    async fn countdown_finishes_when_left_alone() {
        let out = Countdown.call(CountdownInput { seconds: 0 }, TestContext::new().context()).await;
        assert_eq!(out, Ok(Output::text("liftoff")));
    }

    /// What callers see: the schemas generated from the types.
    #[test]
    fn the_schemas_say_what_the_coordinator_checks() {
        let greet = typed(Greet).spec();
        let to = &greet.input_schema["properties"]["to"];
        assert!(to["anyOf"].is_array() || to["$ref"].is_string(), "{to}");
        assert_eq!(greet.input_schema["properties"]["language"]["pattern"], json!(r"^[a-z]{2}(-[A-Z]{2})?$"));
        assert_eq!(greet.output_schema.expect("typed output")["properties"]["greeting"]["type"], json!("string"));
        assert_eq!(greet.title.as_deref(), Some("Greet someone"));
        let countdown = typed(Countdown).spec();
        assert!(countdown.output_schema.is_none(), "an untyped output has no schema");
    }
}

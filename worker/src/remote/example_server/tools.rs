//! The example server's tools. `confirm_delete` and `multi_input` are the
//! fixtures the MCP conformance suite (`tasks-mrtr-input`) expects, and
//! `test_streaming_elicitation` the one of its `server-stateless` scenario,
//! `test_tool_with_task` the one of `tasks-mrtr-composition`;
//! `review_then_approve` is a longer job that asks for approval half-way;
//! `shout` answers at once, never as a task.

use super::tasks::{Asker, Outcome};
use serde_json::{Value, json};
use std::time::Duration;

pub fn list() -> Vec<Value> {
    vec![
        json!({
            "name": "confirm_delete",
            "description": "Asks the user to confirm, then deletes the file (pretend). Runs as a task.",
            "inputSchema": {"type": "object", "properties": {"filename": {"type": "string"}}, "required": ["filename"]},
            "title": "Delete a file",
            "annotations": {"destructiveHint": true, "readOnlyHint": false},
        }),
        json!({
            "name": "multi_input",
            "description": "Asks two questions at once (name and confirmation), then greets. Runs as a task.",
            "inputSchema": {"type": "object", "properties": {}},
        }),
        json!({
            "name": "test_streaming_elicitation",
            "description": "Asks one question at once, then answers with what it was told. Runs as a task.",
            "inputSchema": {"type": "object", "properties": {}},
        }),
        // The suite's `tasks-mrtr-composition` fixture: task-required, so a
        // caller that can answer gets the question as an MRTR round first.
        json!({
            "name": "test_tool_with_task",
            "description": "Asks for a user name at once, then greets that user. Runs only as a task.",
            "inputSchema": {"type": "object", "properties": {}},
            "execution": {"taskSupport": "required"},
        }),
        json!({
            "name": "review_then_approve",
            "description": "Reviews for `seconds` (default 2), asks for approval, then finishes. Runs as a task.",
            "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 3600}}},
        }),
        json!({
            "name": "shout",
            "description": "Answers `text` in capitals at once (never a task).",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        }),
    ]
}

/// Tools that answer in the request, without a task.
pub fn immediate(name: &str) -> bool {
    name == "shout"
}

pub fn exists(name: &str) -> bool {
    list().iter().any(|t| t["name"] == name)
}

fn text(t: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": t.into()}], "isError": false})
}

fn accepted(answer: &Value) -> Option<&Value> {
    (answer["action"] == "accept").then(|| &answer["content"])
}

/// Runs tool `name` inside its task.
pub async fn run(name: String, args: Value, asker: Asker) -> Outcome {
    match name.as_str() {
        "confirm_delete" => {
            let file = args["filename"].as_str().unwrap_or("the file").to_owned();
            let schema = json!({
                "type": "object",
                "properties": {"confirm": {"type": "boolean", "description": "Delete it?"}},
                "required": ["confirm"],
            });
            let answer = asker.ask(&format!("Delete {file}?"), schema).await;
            Ok(match accepted(&answer) {
                Some(c) if c["confirm"] == true => text(format!("Deleted {file}.")),
                _ => text(format!("Kept {file}.")),
            })
        }
        "multi_input" => {
            let name_schema =
                json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
            let confirm_schema =
                json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]});
            let (who, ok) =
                tokio::join!(asker.ask("What is your name?", name_schema), asker.ask("Proceed?", confirm_schema));
            let who = accepted(&who).and_then(|c| c["name"].as_str()).unwrap_or("stranger").to_owned();
            let ok = accepted(&ok).is_some_and(|c| c["confirm"] == true);
            Ok(text(format!("Hello, {who}! Confirmed: {ok}.")))
        }
        "test_streaming_elicitation" => {
            let schema =
                json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]});
            let answer = asker.ask("What should I say?", schema).await;
            Ok(text(accepted(&answer).and_then(|c| c["answer"].as_str()).unwrap_or("nothing").to_owned()))
        }
        "test_tool_with_task" => {
            let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
            let answer = asker.ask("What is your user_name?", schema).await;
            let who = accepted(&answer).and_then(|c| c["name"].as_str()).unwrap_or("stranger").to_owned();
            Ok(text(format!("Hello, {who}!")))
        }
        "review_then_approve" => {
            let seconds = args["seconds"].as_f64().unwrap_or(2.0).clamp(0.0, 3600.0);
            asker.progress("reviewing");
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            let schema =
                json!({"type": "object", "properties": {"approve": {"type": "boolean"}}, "required": ["approve"]});
            let answer = asker.ask("The review is done. Approve?", schema).await;
            asker.progress("finishing");
            Ok(match accepted(&answer) {
                Some(c) if c["approve"] == true => text("Approved and published."),
                _ => json!({"content": [{"type": "text", "text": "Not approved."}], "isError": true}),
            })
        }
        "shout" => Ok(text(args["text"].as_str().unwrap_or_default().to_uppercase())),
        other => Err(json!({"code": -32602, "message": format!("unknown tool {other:?}")})),
    }
}

//! The API's answers as people read them. Each view takes the JSON the
//! gateway sent (the shapes of the history and operator routes) and prints
//! what an operator looks for first; `--json` prints the answer itself.

use super::table::{or_dash, render};
use serde_json::Value;

pub(super) fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::String(s) => or_dash(Some(&printable(s))),
        other => other.to_string(),
    }
}

/// A string a worker or caller filled (a tool's error, a user id), with its
/// control characters escaped: an escape sequence in a tool's error must not
/// reach the operator's terminal, and a newline must not forge a line.
fn printable(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_owned();
    }
    s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// A page of the history: one row per run, and where the page sits.
pub(super) fn list(page: &Value) -> String {
    let empty = Vec::new();
    let items = page["items"].as_array().unwrap_or(&empty);
    if items.is_empty() {
        return format!("no executions match (total {})", text(&page["total_count"]));
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|i| {
            ["id", "execution_status", "tool_name", "user_id", "created_at", "finished_at"]
                .iter()
                .map(|k| text(&i[*k]))
                .collect()
        })
        .collect();
    let table = render(&["ID", "STATUS", "TOOL", "USER", "CREATED", "FINISHED"], &rows);
    let offset = page["offset"].as_u64().unwrap_or(0);
    format!("{table}\n{}–{} of {}", offset + 1, offset + items.len() as u64, text(&page["total_count"]))
}

/// One run: its fields, the timeline, the attempts, and any payload revealed.
pub(super) fn detail(run: &Value) -> String {
    let fields = [
        ("id", "id"),
        ("status", "execution_status"),
        ("tool", "tool_name"),
        ("toolkit", "toolkit_name"),
        ("toolkit version", "toolkit_version"),
        ("user", "user_id"),
        ("surface", "surface"),
        ("type", "execution_type"),
        ("created", "created_at"),
        ("scheduled", "scheduled_at"),
        ("started", "started_at"),
        ("finished", "finished_at"),
        ("duration ms", "duration_ms"),
        ("failure reason", "failure_reason"),
        ("error", "error_message"),
    ];
    let mut out: Vec<String> =
        fields.iter().map(|(label, key)| format!("{:<17}{}", format!("{label}:"), text(&run[*key]))).collect();
    let empty = Vec::new();
    let timeline: Vec<Vec<String>> = run["timeline"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .map(|e| vec![text(&e["at"]), text(&e["event"]), text(&e["status"])])
        .collect();
    out.push(String::new());
    out.push(indent(&render(&["AT", "EVENT", "STATUS"], &timeline), "timeline:"));
    let attempts: Vec<Vec<String>> = run["attempts"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .map(|a| {
            let outcome = match a["success"].as_bool() {
                Some(true) => "success",
                Some(false) => "failure",
                None => "running",
            };
            let error = match (a["error"].as_str(), a["system_error_message"].as_str()) {
                (Some(e), _) | (None, Some(e)) => printable(e),
                (None, None) => "-".to_owned(),
            };
            vec![text(&a["attempt"]), text(&a["started_at"]), text(&a["duration_ms"]), outcome.to_owned(), error]
        })
        .collect();
    out.push(String::new());
    out.push(indent(&render(&["#", "STARTED", "DURATION MS", "OUTCOME", "ERROR"], &attempts), "attempts:"));
    for (label, key) in [("input", "input"), ("output", "output")] {
        if let Some(v) = run.get(key) {
            out.push(String::new());
            out.push(indent(&pretty(v), &format!("{label}:")));
        }
    }
    out.join("\n")
}

fn indent(block: &str, title: &str) -> String {
    let body: Vec<String> = block.lines().map(|l| format!("  {l}")).collect();
    format!("{title}\n{}", body.join("\n"))
}

/// The operator cancel's answer: the outcome, and the status it left.
pub(super) fn cancelled(id: &str, answer: &Value) -> String {
    let status = text(&answer["execution"]["status"]);
    format!("cancel {id}: {} (status {status})", text(&answer["outcome"]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_page_reads_as_a_table() {
        let page = json!({"items": [{"id": "te_1", "execution_status": "completed", "tool_name": "Demo.Echo",
            "user_id": "alice", "created_at": "2026-08-08T00:00:00Z", "finished_at": null}],
            "offset": 0, "total_count": 7});
        let text = list(&page);
        assert!(text.starts_with("ID    STATUS     TOOL       USER   CREATED               FINISHED\n"), "{text}");
        assert!(text.contains("te_1  completed  Demo.Echo  alice  2026-08-08T00:00:00Z  -"), "{text}");
        assert!(text.ends_with("1–1 of 7"), "{text}");
        assert_eq!(list(&json!({"items": [], "total_count": 0})), "no executions match (total 0)");
    }

    #[test]
    fn a_detail_shows_attempt_errors_and_only_revealed_payloads() {
        let run = json!({"id": "te_1", "attempts": [{"attempt": 1, "success": false, "error": "boom"}],
            "timeline": [{"at": "t", "event": "created", "status": "pending"}]});
        let text = detail(&run);
        let row = text.lines().find(|l| l.contains("boom")).expect("the attempt's row");
        assert!(row.trim_start().starts_with('1') && row.contains("failure"), "{text}");
        assert!(!text.contains("input:"), "{text}");
        let text = detail(&json!({"id": "te_1", "input": {"q": 1}}));
        assert!(text.contains("input:\n  {\n    \"q\": 1\n  }"), "{text}");
    }

    #[test]
    fn what_a_tool_or_caller_wrote_reaches_the_terminal_escaped() {
        let hostile = "planned\u{1b}[2J\u{1b}]0;owned\u{7}\nforged: line";
        let run = json!({"id": "te_1", "error_message": hostile, "user_id": "a\rb",
            "attempts": [{"attempt": 1, "success": false, "error": hostile}]});
        let text = detail(&run);
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
        assert!(text.contains(r"planned\u{1b}[2J\u{1b}]0;owned\u{7}\nforged: line"), "{text}");
        assert!(text.contains(r"a\rb"), "{text}");
        assert!(!text.lines().any(|l| l.starts_with("forged")), "{text}");
    }
}

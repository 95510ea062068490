//! 2026-07-28: a task-required tool that may ask for input, called by a client
//! that can answer, gathers its first input through an MRTR round and then
//! becomes a task: round 1 carries `inputRequests` and a sealed `requestState`
//! (no `taskId`), the retry relays the answers and returns the task of the
//! same execution.

use super::fake::text_result;
use super::*;

/// Calls `asks_first` and makes the fake ask one question once the gateway
/// holds the call; returns the call's answer and the execution id.
async fn first_round(h: &Harness) -> (Answer, String) {
    let seen = h.fake.waits();
    let call = h.modern("alice", "tools/call", json!({"name": "asks_first", "arguments": {}}), true);
    let asker = async {
        h.fake.until_waits_exceed(seen).await;
        h.fake.ask(&h.fake.last_id(), "user_name", "Your name?");
    };
    let (answer, ()) = tokio::join!(call, asker);
    (answer, h.fake.last_id())
}

#[tokio::test]
async fn input_asked_in_the_first_window_is_an_mrtr_round_then_the_task() {
    let h = harness().await;
    let (first, id) = first_round(&h).await;
    let round = first.result();
    assert_eq!(round["resultType"], "input_required", "{round}");
    assert_eq!(round["inputRequests"]["user_name"]["params"]["message"], "Your name?");
    assert!(round.get("taskId").is_none(), "round 1 names no task: {round}");
    let state = round["requestState"].as_str().expect("requestState");
    assert!(!state.contains(&id), "the request state is sealed, not the bare execution id");

    let retry = json!({"name": "asks_first", "arguments": {}, "requestState": state,
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}}});
    let second = h.modern("alice", "tools/call", retry, true).await;
    let task = second.result();
    assert_eq!(task["resultType"], "task", "{task}");
    assert_eq!(task["taskId"], id.as_str(), "the same execution");
    assert!(task.get("requestState").is_none() && task.get("inputRequests").is_none(), "{task}");
    assert_eq!(h.fake.count(), 1, "the tool was started once");
    let provided = h.fake.provided();
    assert_eq!(provided.len(), 1, "{provided:?}");
    assert_eq!(
        (provided[0].0.as_str(), provided[0].1.as_str(), provided[0].2.as_str()),
        (id.as_str(), "user_name", "accept")
    );

    h.fake.finish(&id, &text_result("Hello, Alice!", false));
    let got = h.modern("alice", "tasks/get", json!({"taskId": id}), true).await;
    assert_eq!(got.result()["status"], "completed");
    assert_eq!(got.result()["result"]["content"][0]["text"], "Hello, Alice!");
}

#[tokio::test]
async fn a_request_state_is_refused_for_another_user_a_tampered_token_or_a_bare_id() {
    let h = harness().await;
    let (first, id) = first_round(&h).await;
    let state = first.result()["requestState"].as_str().expect("requestState").to_owned();
    let answers = json!({"user_name": {"action": "accept", "content": {"name": "Mallory"}}});
    let mut tampered = state.clone().into_bytes();
    let last = tampered.len() - 2;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ascii");
    for (user, rs) in [("bob", state.as_str()), ("alice", tampered.as_str()), ("alice", id.as_str())] {
        let retry = json!({"name": "asks_first", "arguments": {}, "requestState": rs, "inputResponses": answers});
        let a = h.modern(user, "tools/call", retry, true).await;
        assert_eq!(a.error_code(), -32602, "{user} with {rs}: {:?}", a.body());
    }
    assert!(h.fake.provided().is_empty(), "nothing was relayed");
    assert_eq!(h.fake.count(), 1, "nothing else was started");
}

#[tokio::test]
async fn without_elicitation_the_task_is_handed_over_at_once() {
    let h = harness().await;
    let mut meta = meta(true);
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"extensions": {EXT: {}}});
    let seen = h.fake.waits();
    let a = h.modern("alice", "tools/call", json!({"name": "asks_first", "arguments": {}, "_meta": meta}), true).await;
    assert_eq!(a.result()["resultType"], "task", "{:?}", a.body());
    assert_eq!(h.fake.waits(), seen, "the call was not held");
}

#[tokio::test]
async fn a_tool_that_does_not_ask_in_the_window_becomes_a_task() {
    let h = harness().await;
    let a = h.modern("alice", "tools/call", json!({"name": "asks_first", "arguments": {}}), true).await;
    let task = a.result();
    assert_eq!(task["resultType"], "task", "{task}");
    assert_eq!(task["status"], "working");
    assert!(task.get("requestState").is_none());
}

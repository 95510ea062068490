//! Golden bytes: messages as a release encoded them, committed under
//! `tests/golden/<line>/`, decoded by every later release. A change that
//! renumbers or retypes a field, or drops one an older peer still sends,
//! fails here before it reaches a mixed-version cluster.
//!
//! Each release line keeps its own directory for as long as its peers are
//! inside a coordinator's window (docs/upgrading.md); a release adds its own
//! with `BATON_WRITE_GOLDEN=1 cargo test -p baton-proto --test golden` and
//! never rewrites an older one.

use baton_proto::coordinator::v1 as pb;
use baton_proto::worker::v1::{self as wpb, coordinator_message, settlement, worker_message};
use prost::Message;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn register() -> wpb::Register {
    wpb::Register {
        worker_id: "wk-golden.0a1b2c".into(),
        worker_token: "btw_golden".into(),
        tools: vec![wpb::ToolRegistration {
            name: "Demo.Echo".into(),
            toolkit_name: "Demo".into(),
            toolkit_version: "1.0.0".into(),
            description: "Echoes its input".into(),
            input_schema_json: r#"{"type":"object"}"#.into(),
            background: wpb::BackgroundPolicy::Optional as i32,
            max_attempts: 3,
            max_ttl_ms: 60_000,
            required_client_capabilities: vec!["sampling".into()],
            title: "Echo".into(),
            ..Default::default()
        }],
        capacity: 8,
        running: vec![wpb::RunningAttempt { execution_id: "te_0123456789ABCDEFGHIJabcdefg".into(), attempt: 2 }],
        settling: vec![wpb::RunningAttempt { execution_id: "te_1123456789ABCDEFGHIJabcdefg".into(), attempt: 1 }],
        sdk_version: "0.1.0".into(),
    }
}

fn worker(m: worker_message::Msg) -> wpb::WorkerMessage {
    wpb::WorkerMessage { msg: Some(m) }
}

fn assignment() -> wpb::CoordinatorMessage {
    wpb::CoordinatorMessage {
        msg: Some(coordinator_message::Msg::Assignment(wpb::Assignment {
            execution_id: "te_0123456789ABCDEFGHIJabcdefg".into(),
            attempt: 2,
            tool_name: "Demo.Echo".into(),
            input_json: r#"{"text":"hello"}"#.into(),
            deadline_ms: 1_767_225_600_000,
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            resume_remote_task_id: "task-7".into(),
            pending_input: vec![wpb::InputResponse {
                execution_id: "te_0123456789ABCDEFGHIJabcdefg".into(),
                attempt: 2,
                remote_key: "ask-1".into(),
                action: wpb::InputAction::Accept as i32,
                content_json: r#"{"ok":true}"#.into(),
            }],
        })),
    }
}

fn settlement() -> wpb::WorkerMessage {
    worker(worker_message::Msg::Settlement(wpb::Settlement {
        execution_id: "te_0123456789ABCDEFGHIJabcdefg".into(),
        attempt: 2,
        outcome: Some(settlement::Outcome::Error(wpb::ToolError {
            message: "upstream said no".into(),
            retryable: true,
            detail_json: r#"{"status":502}"#.into(),
            protocol_error: false,
        })),
    }))
}

fn heartbeat() -> wpb::WorkerMessage {
    worker(worker_message::Msg::Heartbeat(wpb::Heartbeat {
        running: vec![wpb::RunningAttempt { execution_id: "te_0123456789ABCDEFGHIJabcdefg".into(), attempt: 2 }],
        free_slots: 7,
        settling: vec![wpb::RunningAttempt { execution_id: "te_1123456789ABCDEFGHIJabcdefg".into(), attempt: 1 }],
    }))
}

fn start() -> pb::StartExecutionRequest {
    pb::StartExecutionRequest {
        org_id: "org_golden".into(),
        project_id: "prj_golden".into(),
        gateway_id: "gw_golden".into(),
        tool_name: "Demo.Echo".into(),
        input_json: r#"{"text":"hello"}"#.into(),
        user_id: "ada@example.com".into(),
        run_at_ms: Some(1_767_225_600_000),
        ttl_ms: Some(600_000),
        idempotency_key: "key-1".into(),
        request_fingerprint: r#"{"gateway_id":"gw_golden"}"#.into(),
        surface: pb::Surface::McpNative as i32,
    }
}

// As 0.1 wrote it: `failure_reason` is the deprecated string twin of `failure`.
#[allow(deprecated)]
fn view() -> pb::ExecutionView {
    pb::ExecutionView {
        execution_id: "te_0123456789ABCDEFGHIJabcdefg".into(),
        status: pb::ExecutionStatus::InputRequired as i32,
        org_id: "org_golden".into(),
        project_id: "prj_golden".into(),
        gateway_id: "gw_golden".into(),
        tool_name: "Demo.Echo".into(),
        toolkit_name: "Demo".into(),
        toolkit_version: "1.0.0".into(),
        user_id: "ada@example.com".into(),
        surface: pb::Surface::Rest as i32,
        execution_type: pb::ExecutionType::Scheduled as i32,
        created_at_ms: 1_767_225_000_000,
        scheduled_at_ms: Some(1_767_225_600_000),
        started_at_ms: Some(1_767_225_600_100),
        finished_at_ms: None,
        updated_at_ms: 1_767_225_600_200,
        execution_deadline_ms: 1_767_226_200_000,
        retention_expires_at_ms: 1_769_817_600_000,
        poll_interval_ms: 500,
        owner_loss_detection_at_ms: Some(1_767_225_610_000),
        failure_reason: String::new(),
        error_message: String::new(),
        summary: "waiting for an answer".into(),
        input_requests: vec![pb::InputRequest {
            request_key: "ir_1".into(),
            message: "Which one?".into(),
            requested_schema_json: r#"{"type":"object"}"#.into(),
            state: pb::InputRequestState::Open as i32,
        }],
        cancel_state: pb::CancelState::None as i32,
        progress: Some(pb::ExecutionProgress {
            current: 1.5,
            total: 3.0,
            message: "halfway".into(),
            updated_at_ms: 1_767_225_600_150,
        }),
        cursor: 42,
        failure: pb::FailureReason::Unspecified as i32,
    }
}

/// Field 99 (a varint) and field 100 (text): what a later release might add.
fn future_fields() -> Vec<u8> {
    let mut bytes = Vec::new();
    prost::encoding::uint64::encode(99, &1, &mut bytes);
    prost::encoding::string::encode(100, &"from the future".to_owned(), &mut bytes);
    bytes
}

/// A `WorkerMessage` whose `register` carries fields this release does not know.
fn register_with_future_fields() -> Vec<u8> {
    let mut inner = register().encode_to_vec();
    inner.extend_from_slice(&future_fields());
    let mut outer = Vec::new();
    prost::encoding::bytes::encode(1, &inner, &mut outer);
    outer
}

/// A `WorkerMessage` of a kind this release does not know (field 50 of the oneof).
fn worker_message_of_a_future_kind() -> Vec<u8> {
    let mut outer = Vec::new();
    prost::encoding::bytes::encode(50, &vec![0x08, 0x01], &mut outer);
    outer
}

/// Each fixture: its file name and its bytes as this release encodes them.
fn fixtures() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("register.bin", worker(worker_message::Msg::Register(register())).encode_to_vec()),
        ("assignment.bin", assignment().encode_to_vec()),
        ("settlement.bin", settlement().encode_to_vec()),
        ("heartbeat.bin", heartbeat().encode_to_vec()),
        ("start_execution_request.bin", start().encode_to_vec()),
        ("execution_view.bin", view().encode_to_vec()),
        ("register_with_future_fields.bin", register_with_future_fields()),
        ("worker_message_of_a_future_kind.bin", worker_message_of_a_future_kind()),
    ]
}

/// What each committed file must decode to, whichever release wrote it.
fn check(name: &str, bytes: &[u8]) -> Result<(), String> {
    fn same<M: Message + Default + PartialEq + std::fmt::Debug>(bytes: &[u8], want: M) -> Result<(), String> {
        let got = M::decode(bytes).map_err(|e| format!("does not decode: {e}"))?;
        if got == want { Ok(()) } else { Err(format!("decodes to {got:?}, not {want:?}")) }
    }
    match name {
        "register.bin" | "register_with_future_fields.bin" => {
            same(bytes, worker(worker_message::Msg::Register(register())))
        }
        "assignment.bin" => same(bytes, assignment()),
        "settlement.bin" => same(bytes, settlement()),
        "heartbeat.bin" => same(bytes, heartbeat()),
        "start_execution_request.bin" => same(bytes, start()),
        "execution_view.bin" => same(bytes, view()),
        // Decoded, it is no message the coordinator acts on (`msg` is none).
        "worker_message_of_a_future_kind.bin" => same(bytes, wpb::WorkerMessage { msg: None }),
        other => Err(format!("no check for {other}")),
    }
}

#[test]
fn every_release_s_golden_bytes_still_decode() {
    let line = baton_proto::version::own(env!("CARGO_PKG_VERSION")).line().to_string();
    if std::env::var_os("BATON_WRITE_GOLDEN").is_some() {
        let own = dir().join(&line);
        std::fs::create_dir_all(&own).expect("golden directory");
        for (name, bytes) in fixtures() {
            std::fs::write(own.join(name), bytes).expect("golden file written");
        }
    }
    let mut releases: Vec<PathBuf> = std::fs::read_dir(dir())
        .expect("tests/golden exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    releases.sort();
    assert!(releases.iter().any(|r| r.ends_with(&line)), "this release's line {line} has its golden bytes");
    let mut failures = Vec::new();
    for release in &releases {
        for (name, _) in fixtures() {
            let path = release.join(name);
            match std::fs::read(&path) {
                Ok(bytes) => {
                    if let Err(e) = check(name, &bytes) {
                        failures.push(format!("{}: {e}", path.display()));
                    }
                }
                // A fixture younger than an older release is fine.
                Err(_) if !release.ends_with(&line) => {}
                Err(e) => failures.push(format!("{}: {e}", path.display())),
            }
        }
    }
    assert!(failures.is_empty(), "golden bytes that no longer decode:\n{}", failures.join("\n"));
}

#[test]
fn this_release_encodes_its_own_golden_bytes_unchanged() {
    // Encoding is deterministic; bytes that differ mean a field moved.
    let own = dir().join(baton_proto::version::own(env!("CARGO_PKG_VERSION")).line().to_string());
    for (name, bytes) in fixtures() {
        let committed = std::fs::read(own.join(name)).unwrap_or_default();
        assert_eq!(committed, bytes, "{name}: regenerate with BATON_WRITE_GOLDEN=1 only when cutting a release");
    }
}

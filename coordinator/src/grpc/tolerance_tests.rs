//! Enum values a newer peer may send that this release does not know. prost
//! keeps an enum field as its `i32` and its getter answers `Unspecified` for
//! a value it cannot name; each conversion below must make of that a clear
//! refusal or a safe default, never a panic nor `internal`.

use super::convert;
use crate::domain::Surface;
use baton_proto::coordinator::v1 as pb;
use baton_proto::worker::v1 as wpb;

/// A value no release has declared yet.
const FUTURE: i32 = 77;

#[test]
fn a_start_from_an_unknown_surface_is_recorded_as_rest() {
    // REST is the strictest surface: a tool that forbids background runs is
    // refused rather than run in a way it did not agree to.
    let r = pb::StartExecutionRequest { surface: FUTURE, ..Default::default() };
    assert_eq!(convert::surface(r.surface()), Surface::Rest);
}

#[test]
fn a_wait_from_an_unknown_status_waits_from_the_current_one() {
    let r = pb::WaitExecutionRequest { known_status: FUTURE, ..Default::default() };
    assert_eq!(convert::known_status(r.known_status()), None);
}

#[test]
fn a_peer_stop_for_an_unknown_reason_is_refused_by_the_peer_service() {
    let r = pb::DeliverCancelRequest { reason: FUTURE, ..Default::default() };
    // `peer::deliver_cancel` answers InvalidArgument for `None`.
    assert_eq!(convert::stop_reason_from_wire(r.reason()), None);
}

#[test]
fn an_unknown_input_action_is_refused_from_an_owner_and_cancels_when_relayed() {
    let answer = pb::InputResponse { action: FUTURE, content_json: "{}".into() };
    // `api::provide_input` hands the engine this name; the engine refuses the empty one.
    assert_eq!(answer.action().name(), "");
    // A peer's relayed answer of that name reaches the worker as a cancel,
    // never as consent.
    assert_eq!(convert::input_action(answer.action().name()), wpb::InputAction::Cancel);
    let relayed = pb::DeliverInputRequest { action: FUTURE, ..Default::default() };
    assert_eq!(convert::input_action(relayed.action().name()), wpb::InputAction::Cancel);
}

#[test]
fn a_tool_with_an_unknown_background_policy_reaches_the_engine_as_none() {
    let tool = wpb::ToolRegistration { name: "T".into(), background: FUTURE, ..Default::default() };
    let r = super::worker::registration(wpb::Register { tools: vec![tool], ..Default::default() });
    // `engine::workers::validated` refuses it (engine::tests::a_tool_with_a_background_policy_from_a_newer_sdk_is_refused).
    assert_eq!(r.tools[0].background, None);
}

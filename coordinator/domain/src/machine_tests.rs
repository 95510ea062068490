//! Table tests and the property test for the state machine.

use super::machine::*;
use super::status::{FailureReason, Status};
use proptest::prelude::*;

const DEADLINE: Millis = 1_000_000;

fn pending() -> State {
    State::new(0, DEADLINE, 3)
}

fn claim(w: &str) -> Event {
    Event::Claim { worker_id: w.into(), lease_until: 10_000 }
}

fn run(state: &State, events: &[Event], now: Millis) -> State {
    events.iter().fold(state.clone(), |s, e| apply(&s, e, now).map(|t| t.next).unwrap_or(s))
}

#[test]
fn claim_invokes_attempt_one() {
    let t = apply(&pending(), &claim("w1"), 5).expect("claim");
    assert_eq!(t.next.status(), Status::Working);
    assert_eq!(t.effects, vec![Effect::Invoke { worker_id: "w1".into(), attempt: 1 }]);
}

#[test]
fn table_of_settlements() {
    let working = run(&pending(), &[claim("w1"), Event::RequestCancel], 5);
    let cases = [
        (Outcome::Success, Status::Completed),
        (Outcome::Cancelled, Status::Cancelled),
        (Outcome::ToolError { retryable: false }, Status::Failed),
    ];
    for (outcome, status) in cases {
        let t = apply(&working, &Event::Settle { worker_id: "w1".into(), attempt: 1, outcome }, 10).expect("settle");
        assert_eq!(t.next.status(), status, "{outcome:?}");
        assert_eq!(t.effects.contains(&Effect::Terminal), status.is_terminal());
    }
}

#[test]
fn a_stop_nobody_asked_for_is_not_a_cancellation() {
    let working = run(&pending(), &[claim("w1")], 5);
    let settle = Event::Settle { worker_id: "w1".into(), attempt: 1, outcome: Outcome::Cancelled };
    let at_deadline = apply(&working, &settle, DEADLINE).expect("settle").next;
    assert_eq!(at_deadline.phase, Phase::Failed { reason: FailureReason::DeadlineExceeded });
    let early = apply(&working, &settle, 10).expect("settle").next;
    assert_eq!(early.phase, Phase::Failed { reason: FailureReason::ToolError });
    let retry = Event::Settle { worker_id: "w1".into(), attempt: 1, outcome: Outcome::ToolError { retryable: true } };
    assert_eq!(apply(&working, &retry, 10).expect("settle").next.status(), Status::Pending);
}

#[test]
fn duplicate_and_stale_settlements_are_ignored() {
    let working = run(&pending(), &[claim("w1")], 5);
    let done = apply(&working, &Event::Settle { worker_id: "w1".into(), attempt: 1, outcome: Outcome::Success }, 6)
        .expect("settle")
        .next;
    assert_eq!(
        apply(&done, &Event::Settle { worker_id: "w1".into(), attempt: 1, outcome: Outcome::Success }, 7),
        Err(Ignored::Terminal)
    );
    assert_eq!(
        apply(&working, &Event::Settle { worker_id: "w1".into(), attempt: 2, outcome: Outcome::Success }, 7),
        Err(Ignored::StaleAttempt)
    );
}

#[test]
fn only_the_lease_holder_settles_or_keeps_the_lease() {
    let working = run(&pending(), &[claim("w1")], 5);
    let forged = Event::Settle { worker_id: "w2".into(), attempt: 1, outcome: Outcome::Success };
    assert_eq!(apply(&working, &forged, 6), Err(Ignored::NotHolder));
    let heartbeat = Event::Heartbeat { worker_id: "w2".into(), attempt: 1, lease_until: 99 };
    assert_eq!(apply(&working, &heartbeat, 6), Err(Ignored::NotHolder));
    let reclaim = Event::Undelivered { worker_id: "w2".into(), attempt: 1 };
    assert_eq!(apply(&working, &reclaim, 6), Err(Ignored::NotHolder));
}

#[test]
fn retryable_failures_retry_up_to_the_limit_then_fail() {
    let mut s = pending();
    let mut now = 0;
    for attempt in 1..=3 {
        now += 60_000;
        s = apply(&s, &claim("w"), now).expect("claimable").next;
        s = apply(
            &s,
            &Event::Settle { worker_id: "w".into(), attempt, outcome: Outcome::ToolError { retryable: true } },
            now,
        )
        .expect("settle")
        .next;
    }
    assert_eq!(s.phase, Phase::Failed { reason: FailureReason::ToolError });
    assert_eq!(s.attempts, 3);
}

#[test]
fn a_retry_waits_for_its_backoff() {
    let s = run(&pending(), &[claim("w")], 0);
    let s = apply(
        &s,
        &Event::Settle { worker_id: "w".into(), attempt: 1, outcome: Outcome::ToolError { retryable: true } },
        100,
    )
    .expect("settle")
    .next;
    assert_eq!(apply(&s, &claim("w"), 101), Err(Ignored::NotDue));
    assert!(apply(&s, &claim("w"), 300).is_ok());
}

#[test]
fn cancel_of_pending_is_immediate_and_of_working_sends_a_stop() {
    let t = apply(&pending(), &Event::RequestCancel, 1).expect("cancel");
    assert_eq!(t.next.status(), Status::Cancelled);
    let working = run(&pending(), &[claim("w1")], 1);
    let t = apply(&working, &Event::RequestCancel, 2).expect("cancel");
    assert_eq!(t.next.status(), Status::Working);
    assert!(t.next.cancel_requested);
    assert_eq!(t.effects, vec![Effect::Stop { worker_id: "w1".into(), attempt: 1, reason: StopReason::Cancelled }]);
    assert_eq!(apply(&t.next, &Event::RequestCancel, 3), Err(Ignored::AlreadyRequested));
}

#[test]
fn a_retryable_failure_after_cancel_does_not_retry() {
    let s = run(&pending(), &[claim("w"), Event::RequestCancel], 1);
    let t = apply(
        &s,
        &Event::Settle { worker_id: "w".into(), attempt: 1, outcome: Outcome::ToolError { retryable: true } },
        2,
    )
    .expect("settle");
    assert_eq!(t.next.status(), Status::Failed);
}

#[test]
fn owner_loss_is_detected_then_fails() {
    let s = run(&pending(), &[claim("w1")], 1);
    assert_eq!(apply(&s, &Event::LeaseLapsed { detect_at: 20_000 }, 9_999), Err(Ignored::NotDue));
    let s = apply(&s, &Event::LeaseLapsed { detect_at: 20_000 }, 10_000).expect("lapse").next;
    assert_eq!(s.owner_loss_detection_at, Some(20_000));
    assert_eq!(apply(&s, &Event::OwnerLossDue, 19_999), Err(Ignored::NotDue));
    let t = apply(&s, &Event::OwnerLossDue, 20_000).expect("lost");
    assert_eq!(t.next.phase, Phase::Failed { reason: FailureReason::OwnerLost });
}

#[test]
fn a_heartbeat_clears_owner_loss_detection() {
    let s = run(&pending(), &[claim("w1"), Event::LeaseLapsed { detect_at: 20_000 }], 10_000);
    let hb = Event::Heartbeat { worker_id: "w1".into(), attempt: 1, lease_until: 30_000 };
    let s = apply(&s, &hb, 11_000).expect("heartbeat").next;
    assert_eq!(s.owner_loss_detection_at, None);
    let other = Event::Heartbeat { worker_id: "w2".into(), attempt: 1, lease_until: 30_000 };
    assert_eq!(apply(&s, &other, 11_000), Err(Ignored::NotHolder));
}

#[test]
fn an_undelivered_attempt_is_claimable_again_without_using_an_attempt() {
    let s = run(&pending(), &[claim("w1")], 1);
    let wrong = Event::Undelivered { worker_id: "w2".into(), attempt: 1 };
    assert_eq!(apply(&s, &wrong, 2), Err(Ignored::NotHolder));
    let t = apply(&s, &Event::Undelivered { worker_id: "w1".into(), attempt: 1 }, 2).expect("undelivered");
    assert_eq!(t.next.phase, Phase::Pending { not_before: 2 });
    assert_eq!(t.next.attempts, 0);
    let again = apply(&t.next, &claim("w2"), 3).expect("claim");
    assert_eq!(again.effects, vec![Effect::Invoke { worker_id: "w2".into(), attempt: 1 }]);
}

#[test]
fn a_recorded_remote_task_is_resumed_by_a_new_owner_not_called_again() {
    let s = run(&pending(), &[claim("w1")], 1);
    let rec = Event::RemoteTaskRecorded { worker_id: "w1".into(), attempt: 1, deadline: Some(500_000) };
    let s = apply(&s, &rec, 2).expect("recorded").next;
    assert!(s.remote_task);
    assert_eq!(s.deadline, 500_000, "a shorter remote ttl shortens the deadline");
    let s = run(&s, &[Event::LeaseLapsed { detect_at: 20_000 }], 10_000);
    let t = apply(&s, &Event::OwnerLossDue, 20_000).expect("due");
    assert_eq!(t.next.phase, Phase::Pending { not_before: 20_000 }, "handed on, not failed");
    let t = apply(&t.next, &claim("w2"), 20_001).expect("claim");
    assert_eq!(t.effects, vec![Effect::Resume { worker_id: "w2".into(), attempt: 1 }]);
    assert_eq!(t.next.attempts, 1);
}

#[test]
fn input_requests_pause_and_answers_resume() {
    let s = run(&pending(), &[claim("w1")], 1);
    let s = apply(&s, &Event::InputRequested { worker_id: "w1".into(), attempt: 1 }, 2).expect("asked").next;
    assert_eq!(s.status(), Status::InputRequired);
    let partial = apply(&s, &Event::InputAnswered { all_answered: false }, 3).expect("partial").next;
    assert_eq!(partial.status(), Status::InputRequired);
    let all = apply(&s, &Event::InputAnswered { all_answered: true }, 3).expect("all").next;
    assert_eq!(all.status(), Status::Working);
    let t =
        apply(&all, &Event::Settle { worker_id: "w1".into(), attempt: 1, outcome: Outcome::UnsupportedInteraction }, 4)
            .expect("settle");
    assert_eq!(t.next.phase, Phase::Failed { reason: FailureReason::UnsupportedInteraction });
}

#[test]
fn deadline_fails_and_stops_the_owner() {
    let s = run(&pending(), &[claim("w1")], 1);
    assert_eq!(apply(&s, &Event::DeadlinePassed, DEADLINE - 1), Err(Ignored::NotDue));
    let t = apply(&s, &Event::DeadlinePassed, DEADLINE).expect("deadline");
    assert_eq!(t.next.phase, Phase::Failed { reason: FailureReason::DeadlineExceeded });
    assert!(t.effects.iter().any(|e| matches!(e, Effect::Stop { reason: StopReason::DeadlineExceeded, .. })));
}

#[test]
fn nothing_is_claimable_past_the_deadline() {
    assert_eq!(apply(&pending(), &claim("w"), DEADLINE), Err(Ignored::NotDue));
}

fn any_event() -> impl Strategy<Value = Event> {
    let worker = prop_oneof![Just("w1".to_string()), Just("w2".to_string())];
    let outcome = prop_oneof![
        Just(Outcome::Success),
        Just(Outcome::Cancelled),
        Just(Outcome::UnsupportedInteraction),
        Just(Outcome::ProtocolError),
        any::<bool>().prop_map(|retryable| Outcome::ToolError { retryable }),
    ];
    prop_oneof![
        (worker.clone(), 0..DEADLINE).prop_map(|(worker_id, lease_until)| Event::Claim { worker_id, lease_until }),
        (worker, 0u32..5, 0..DEADLINE).prop_map(|(worker_id, attempt, lease_until)| Event::Heartbeat {
            worker_id,
            attempt,
            lease_until
        }),
        (prop_oneof![Just("w1".to_string()), Just("w2".to_string())], 0u32..5, outcome)
            .prop_map(|(worker_id, attempt, outcome)| Event::Settle { worker_id, attempt, outcome }),
        Just(Event::RequestCancel),
        (0..DEADLINE).prop_map(|detect_at| Event::LeaseLapsed { detect_at }),
        Just(Event::OwnerLossDue),
        Just(Event::DeadlinePassed),
        Just(Event::Refuse),
        (prop_oneof![Just("w1".to_string()), Just("w2".to_string())], 0u32..5)
            .prop_map(|(worker_id, attempt)| Event::Undelivered { worker_id, attempt }),
        (prop_oneof![Just("w1".to_string()), Just("w2".to_string())], 0u32..5, proptest::option::of(0..DEADLINE))
            .prop_map(|(worker_id, attempt, deadline)| Event::RemoteTaskRecorded { worker_id, attempt, deadline }),
        (prop_oneof![Just("w1".to_string()), Just("w2".to_string())], 0u32..5)
            .prop_map(|(worker_id, attempt)| Event::InputRequested { worker_id, attempt }),
        any::<bool>().prop_map(|all_answered| Event::InputAnswered { all_answered }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    /// No event sequence leaves a terminal state, and no path re-invokes: the tool
    /// runs once, plus once more per retryable failure it reported itself (an
    /// assignment proven undelivered never ran, so it does not count).
    #[test]
    fn terminal_is_final_and_invocations_are_earned(
        steps in proptest::collection::vec((any_event(), 0..DEADLINE + 10), 1..40),
        max_attempts in 1u32..4,
    ) {
        let mut state = State::new(0, DEADLINE, max_attempts);
        let mut invocations = 0u32;
        let mut retryable_failures = 0u32;
        let mut undelivered = 0u32;
        let mut last_attempt = 0u32;
        for (event, now) in steps {
            let was_terminal = state.status().is_terminal();
            if let Ok(t) = apply(&state, &event, now) {
                prop_assert!(!was_terminal, "a terminal state accepted {event:?}");
                for effect in &t.effects {
                    if let Effect::Invoke { attempt, .. } = effect {
                        invocations += 1;
                        prop_assert!(*attempt > last_attempt, "attempt numbers must increase");
                        last_attempt = *attempt;
                    }
                }
                // A proven-undelivered assignment gives back its invocation; with a
                // recorded remote task the lease came from a resume, not a call.
                if let Event::Undelivered { attempt, .. } = &event
                    && !state.remote_task
                {
                    undelivered += 1;
                    last_attempt = attempt - 1;
                }
                if matches!(event, Event::Settle { outcome: Outcome::ToolError { retryable: true }, .. })
                    && t.next.status() == Status::Pending
                {
                    retryable_failures += 1;
                }
                prop_assert!(t.next.attempts <= t.next.max_attempts);
                prop_assert_eq!(t.effects.contains(&Effect::Terminal), t.next.status().is_terminal());
                state = t.next;
            }
            prop_assert!(invocations - undelivered <= 1 + retryable_failures);
            prop_assert_eq!(state.phase.lease().is_some(), matches!(state.status(), Status::Working | Status::InputRequired));
        }
    }
}

#[test]
fn a_protocol_error_fails_at_once_even_with_attempts_left() {
    let s = run(&pending(), &[claim("w1")], 1);
    assert!(s.max_attempts > 1, "the test needs attempts left");
    let settle = Event::Settle { worker_id: "w1".into(), attempt: 1, outcome: Outcome::ProtocolError };
    let t = apply(&s, &settle, 2).expect("settle");
    assert_eq!(t.next.phase, Phase::Failed { reason: FailureReason::ProtocolError });
    assert!(!t.effects.iter().any(|e| matches!(e, Effect::RetryAt(_))));
}

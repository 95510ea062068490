//! How a worker finds its way back to a coordinator after a session ends.
//!
//! The worker's running executions survive a lost session only if it
//! registers again (with what it runs) before their leases lapse into
//! `owner_lost`: lease plus owner-loss grace is 10 s by default. So the pause
//! between tries is short and bounded well inside that, a session that had
//! registered starts the count afresh (an earlier outage never slows a later
//! one), and every configured coordinator is tried in turn, so one that is
//! down or restarting is left for the next at once. A name is re-resolved on
//! every dial, which serves a Kubernetes Service as well as a list does.

use std::time::Duration;

/// The first pause after a session ends.
pub const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between tries: a fifth of the default lease, so a worker
/// whose coordinator came back is registered again within about a second.
pub const MAX_PAUSE: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct Reconnect {
    endpoints: Vec<String>,
    current: usize,
    pause: Duration,
}

impl Reconnect {
    /// `primary` first, then `others` in order (duplicates and blanks dropped).
    pub fn new(primary: &str, others: &[String]) -> Reconnect {
        let mut endpoints = vec![primary.to_owned()];
        for url in others {
            if !url.trim().is_empty() && !endpoints.contains(url) {
                endpoints.push(url.clone());
            }
        }
        Reconnect { endpoints, current: 0, pause: FIRST_PAUSE }
    }

    /// How many coordinators there are to try.
    pub fn count(&self) -> usize {
        self.endpoints.len()
    }

    /// The coordinator to dial next.
    pub fn endpoint(&self) -> &str {
        &self.endpoints[self.current]
    }

    /// A session ended; `registered` when it had been accepted. Answers how
    /// long to wait before dialling [`Reconnect::endpoint`] again.
    pub fn ended(&mut self, registered: bool) -> Duration {
        // Whatever ended the session, the next try goes to another coordinator
        // when there is one: the one just lost is the likeliest to be down.
        self.current = (self.current + 1) % self.endpoints.len();
        if registered {
            self.pause = FIRST_PAUSE;
            return FIRST_PAUSE;
        }
        let pause = self.pause;
        self.pause = (self.pause * 2).min(MAX_PAUSE);
        pause
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_stay_short_and_restart_after_a_registered_session() {
        let mut r = Reconnect::new("http://a", &[]);
        let pauses: Vec<u64> = (0..8).map(|_| r.ended(false).as_millis() as u64).collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1000, 1000, 1000, 1000]);
        // A long outage earlier must not slow the way back from the next one.
        assert_eq!(r.ended(true), FIRST_PAUSE);
        assert_eq!(r.ended(false), FIRST_PAUSE);
        assert_eq!(r.endpoint(), "http://a");
    }

    #[test]
    fn every_coordinator_is_tried_in_turn() {
        let others = ["http://b".to_owned(), String::new(), "http://a".to_owned(), "http://c".to_owned()];
        let mut r = Reconnect::new("http://a", &others);
        let mut seen = vec![r.endpoint().to_owned()];
        for registered in [true, false, false, false] {
            r.ended(registered);
            seen.push(r.endpoint().to_owned());
        }
        assert_eq!(seen, ["http://a", "http://b", "http://c", "http://a", "http://b"]);
    }
}

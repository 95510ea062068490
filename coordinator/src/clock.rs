//! The coordinator's one clock: wall time in milliseconds since the Unix
//! epoch, the unit every stored time uses.

use crate::domain::Millis;

/// Now; 0 on a clock set before 1970 (never negative).
pub fn now_ms() -> Millis {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

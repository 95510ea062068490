//! The list's filters and page, as they live in the URL: the same names as the
//! history API (`tool_name`, `toolkit_name`, `user_id`, `outcome`,
//! `failure_reason`, `start_time`, `end_time`) plus `offset`. A URL is brought
//! to one canonical form (empty fields dropped, times in RFC 3339 UTC), so a
//! submitted filter form, a reload and a pasted link all read the same. The
//! reveal toggles are never among them.

use super::html::url_part;
use crate::coordinator::history::HistoryQuery;
use baton_proto::coordinator::v1::{ExecutionOutcome, FailureReason};
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime};

/// Rows per page.
pub(super) const PAGE: u32 = 50;
/// Filter values are at most this many characters (as in the history API).
const MAX_CHARS: usize = 512;
/// The furthest a page may start (the coordinator's offsets are `i32`).
const MAX_OFFSET: u32 = i32::MAX as u32;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Filters {
    pub(crate) tool_name: Option<String>,
    pub(crate) toolkit_name: Option<String>,
    pub(crate) user_id: Option<String>,
    pub(crate) outcome: Option<ExecutionOutcome>,
    pub(crate) failure_reason: Option<FailureReason>,
    pub(crate) start_ms: Option<i64>,
    pub(crate) end_ms: Option<i64>,
    pub(crate) offset: u32,
}

/// A filter value the dashboard cannot use, named for the person who typed it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Invalid(pub String);

fn text(label: &str, v: &str) -> Result<Option<String>, Invalid> {
    bounded_text(label, v, MAX_CHARS)
}

/// A text filter: trimmed, none when empty, at most `max` characters and no
/// control characters.
pub(super) fn bounded_text(label: &str, v: &str, max: usize) -> Result<Option<String>, Invalid> {
    let v = v.trim();
    if v.is_empty() {
        return Ok(None);
    }
    if v.chars().count() > max || v.chars().any(char::is_control) {
        return Err(Invalid(format!("{label} must be at most {max} characters, without control characters")));
    }
    Ok(Some(v.to_owned()))
}

/// A page offset: empty is the first page.
pub(super) fn offset(v: &str) -> Result<u32, Invalid> {
    if v.is_empty() {
        return Ok(0);
    }
    v.parse::<u32>()
        .ok()
        .filter(|o| *o <= MAX_OFFSET)
        .ok_or_else(|| Invalid("The page offset must be a whole number".into()))
}

/// RFC 3339, or what a `datetime-local` field sends (`2026-11-30T15:04` or
/// with seconds), read as UTC.
fn moment(label: &str, v: &str) -> Result<Option<i64>, Invalid> {
    let v = v.trim();
    if v.is_empty() {
        return Ok(None);
    }
    let local_seconds = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
    let local_minutes = format_description!("[year]-[month]-[day]T[hour]:[minute]");
    let t = OffsetDateTime::parse(v, &Rfc3339)
        .ok()
        .or_else(|| PrimitiveDateTime::parse(v, &local_seconds).ok().map(PrimitiveDateTime::assume_utc))
        .or_else(|| PrimitiveDateTime::parse(v, &local_minutes).ok().map(PrimitiveDateTime::assume_utc))
        .ok_or_else(|| Invalid(format!("{label} must be a date and time, e.g. 2026-08-08T00:00:00Z")))?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000)
        .map(Some)
        .map_err(|_| Invalid(format!("{label} is out of range")))
}

/// The value of a `datetime-local` field for `ms` (UTC, to the second).
pub(super) fn local_input(ms: i64) -> String {
    let format = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&format).ok())
        .unwrap_or_default()
}

fn rfc3339(ms: i64) -> String {
    crate::json::rfc3339(ms).as_str().unwrap_or_default().to_owned()
}

impl Filters {
    /// Reads the query's pairs; unknown names are ignored (the canonical URL drops them).
    pub(super) fn parse(pairs: &[(String, String)]) -> Result<Filters, Invalid> {
        let mut f = Filters::default();
        for (name, v) in pairs {
            match name.as_str() {
                "tool_name" => f.tool_name = text("Tool", v)?,
                "toolkit_name" => f.toolkit_name = text("Toolkit", v)?,
                "user_id" => f.user_id = text("User ID", v)?,
                "outcome" if v.is_empty() => f.outcome = None,
                "outcome" => {
                    f.outcome = Some(
                        ExecutionOutcome::from_name(v)
                            .ok_or_else(|| Invalid("Outcome must be success or failure".into()))?,
                    )
                }
                "failure_reason" if v.is_empty() => f.failure_reason = None,
                "failure_reason" => {
                    f.failure_reason = Some(FailureReason::from_name(v).ok_or_else(|| {
                        let known = FailureReason::names().collect::<Vec<_>>().join(", ");
                        Invalid(format!("Failure reason must be one of {known}"))
                    })?)
                }
                "start_time" => f.start_ms = moment("Created from", v)?,
                "end_time" => f.end_ms = moment("Created before", v)?,
                "offset" => f.offset = offset(v)?,
                _ => {}
            }
        }
        if let (Some(start), Some(end)) = (f.start_ms, f.end_ms)
            && start > end
        {
            return Err(Invalid("Created from must not be after Created before".into()));
        }
        Ok(f)
    }

    /// The canonical query string (no leading `?`), with `offset` when not 0.
    pub(super) fn query(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut push = |name: &str, v: Option<String>| {
            if let Some(v) = v {
                parts.push(format!("{name}={}", url_part(&v)));
            }
        };
        push("tool_name", self.tool_name.clone());
        push("toolkit_name", self.toolkit_name.clone());
        push("user_id", self.user_id.clone());
        push("outcome", self.outcome.map(|o| o.name().to_owned()));
        push("failure_reason", self.failure_reason.map(|r| r.name().to_owned()));
        push("start_time", self.start_ms.map(rfc3339));
        push("end_time", self.end_ms.map(rfc3339));
        push("offset", (self.offset > 0).then(|| self.offset.to_string()));
        parts.join("&")
    }

    /// `?query`, or nothing when there is no filter.
    pub(super) fn suffix(&self) -> String {
        let q = self.query();
        if q.is_empty() { q } else { format!("?{q}") }
    }

    /// The same filters on another page.
    pub(super) fn at(&self, offset: u32) -> Filters {
        Filters { offset, ..self.clone() }
    }

    pub(super) fn is_filtered(&self) -> bool {
        self.at(0) != Filters::default()
    }

    pub(super) fn history(&self) -> HistoryQuery {
        HistoryQuery {
            tool_name: self.tool_name.clone(),
            toolkit_name: self.toolkit_name.clone(),
            user_id: self.user_id.clone(),
            outcome: self.outcome,
            failure_reason: self.failure_reason,
            start_ms: self.start_ms,
            end_ms: self.end_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn a_submitted_form_becomes_the_canonical_url() {
        let f = Filters::parse(&pairs(&[
            ("tool_name", "Demo.Fail"),
            ("toolkit_name", ""),
            ("user_id", " a b@x "),
            ("outcome", "failure"),
            ("failure_reason", ""),
            ("start_time", "2026-08-08T00:00"),
            ("end_time", "2026-08-08T02:00:00+02:00"),
            ("offset", "0"),
            ("show_inputs", "true"),
        ]))
        .expect("valid");
        let q = f.query();
        assert_eq!(
            q,
            "tool_name=Demo.Fail&user_id=a%20b%40x&outcome=failure&start_time=2026-08-08T00%3A00%3A00Z&end_time=2026-08-08T00%3A00%3A00Z"
        );
        // The canonical form reads back to itself, so the redirect happens once.
        let again: Vec<(String, String)> = q
            .split('&')
            .filter_map(|p| p.split_once('='))
            .map(|(a, b)| (a.to_owned(), b.replace("%20", " ").replace("%40", "@").replace("%3A", ":")))
            .collect();
        assert_eq!(Filters::parse(&again).expect("valid").query(), q);
        assert_eq!(f.at(50).query(), format!("{q}&offset=50"));
        assert!(!q.contains("show_inputs"), "unknown names are dropped, toggles among them");
    }

    #[test]
    fn bad_values_are_named() {
        for (name, v, says) in [
            ("outcome", "cancelled", "Outcome"),
            ("failure_reason", "boom", "Failure reason"),
            ("start_time", "yesterday", "Created from"),
            ("offset", "-1", "offset"),
            ("user_id", "a\u{1}", "User ID"),
        ] {
            let e = Filters::parse(&pairs(&[(name, v)])).expect_err("invalid");
            assert!(e.0.contains(says), "{name}: {}", e.0);
        }
        let reversed = Filters::parse(&pairs(&[("start_time", "2026-08-09T00:00"), ("end_time", "2026-08-08T00:00")]));
        assert!(reversed.is_err());
        assert_eq!(local_input(1_786_147_200_000), "2026-08-08T00:00:00");
    }
}

//! JSON helpers both surfaces share: the canonical form (key order never
//! matters), timestamps as RFC 3339, and integers that may arrive as `5.0`.
//! Knows nothing about HTTP, REST or MCP.

use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Sorts object keys recursively so equal values serialise identically.
pub(crate) fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<_> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k.clone(), canonical(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// Milliseconds since the epoch as RFC 3339 UTC with milliseconds, or null
/// when out of range.
pub(crate) fn rfc3339(ms: i64) -> Value {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .map(Value::String)
        .unwrap_or(Value::Null)
}

/// A float that is an exact integer within the range floats count exactly.
pub(crate) fn integral(f: f64) -> Option<i64> {
    (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
}

/// An integer written as `5` or `5.0` (JSON Schema calls both integers);
/// `None` for anything else.
pub(crate) fn integer(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_f64().and_then(integral))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_sorts_keys_at_every_depth() {
        let v = json!({"b": [{"y": 1, "x": 2}], "a": {"d": 1, "c": 2}});
        assert_eq!(canonical(&v).to_string(), r#"{"a":{"c":2,"d":1},"b":[{"x":2,"y":1}]}"#);
    }

    #[test]
    fn integers_may_be_integral_floats() {
        assert_eq!(integer(&json!(5)), Some(5));
        assert_eq!(integer(&json!(5.0)), Some(5));
        assert_eq!(integer(&json!(-3.0)), Some(-3));
        assert_eq!(integer(&json!(5.5)), None);
        assert_eq!(integer(&json!(1.0e16)), None);
        assert_eq!(integer(&json!("5")), None);
    }

    #[test]
    fn timestamps_have_milliseconds_or_are_null() {
        assert_eq!(rfc3339(1_500), json!("1970-01-01T00:00:01.5Z"));
        assert_eq!(rfc3339(i64::MAX), Value::Null);
    }
}

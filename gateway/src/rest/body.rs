//! Request bodies: parsed from raw bytes so every malformed or mistyped field is
//! a 400 that names the field, never a framework error page.

use crate::coordinator::NewExecution;
use crate::error::ApiError;
use crate::json;
use baton_proto::coordinator::v1::Surface;
use baton_proto::error::ErrorCode;
use baton_proto::worker::v1::InputAction;
use serde_json::{Map, Value};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, message)
}

fn object(raw: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(raw) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(invalid("request body must be a JSON object")),
        Err(_) => Err(invalid("request body is not valid JSON")),
    }
}

fn reject_unknown(map: &Map<String, Value>, known: &[&str]) -> Result<(), ApiError> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(invalid(format!("unknown field `{k}`"))),
        None => Ok(()),
    }
}

fn required_string(map: &Map<String, Value>, field: &str) -> Result<String, ApiError> {
    match map.get(field) {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 512 => Ok(s.clone()),
        Some(Value::String(_)) => Err(invalid(format!("`{field}` must be 1 to 512 characters"))),
        Some(_) => Err(invalid(format!("`{field}` must be a string"))),
        None => Err(invalid(format!("`{field}` is required"))),
    }
}

fn optional_string(map: &Map<String, Value>, field: &str) -> Result<Option<String>, ApiError> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => required_string(map, field).map(Some),
    }
}

/// An integer that may arrive as `5` or `5.0` (JSON Schema calls both integers).
fn integer(v: &Value, field: &str) -> Result<i64, ApiError> {
    json::integer(v).ok_or_else(|| invalid(format!("`{field}` must be an integer")))
}

/// Parses a query-string integer within `[min, max]`.
pub(crate) fn parse_bounded_int(s: &str, field: &str, min: i64, max: i64) -> Result<i64, ApiError> {
    let v = s
        .parse::<i64>()
        .ok()
        .or_else(|| s.parse::<f64>().ok().and_then(json::integral))
        .ok_or_else(|| invalid(format!("`{field}` must be an integer")))?;
    if v < min || v > max {
        return Err(invalid(format!("`{field}` must be between {min} and {max}")));
    }
    Ok(v)
}

/// The longest retention window a project may set: ten years, in seconds.
pub(crate) const MAX_RETENTION_SECONDS: i64 = 10 * 366 * 86_400;

/// `PUT …/retention`: `{"retention_seconds": N}` sets the project's window,
/// `{"retention_seconds": null}` clears it. The field is required, so an empty
/// body never clears a window by accident.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RetentionBody {
    pub(crate) retention_ms: Option<i64>,
}

impl RetentionBody {
    pub(crate) fn parse(raw: &[u8]) -> Result<Self, ApiError> {
        let map = object(raw)?;
        reject_unknown(&map, &["retention_seconds"])?;
        let retention_ms = match map.get("retention_seconds") {
            None => return Err(invalid("`retention_seconds` is required (null clears the project's window)")),
            Some(Value::Null) => None,
            Some(v) => {
                let seconds = integer(v, "retention_seconds")?;
                if !(0..=MAX_RETENTION_SECONDS).contains(&seconds) {
                    return Err(invalid(format!("`retention_seconds` must be between 0 and {MAX_RETENTION_SECONDS}")));
                }
                Some(seconds * 1000)
            }
        };
        Ok(RetentionBody { retention_ms })
    }
}

#[derive(Debug)]
pub(crate) struct StartBody {
    pub(crate) gateway_id: String,
    pub(crate) tool_name: String,
    pub(crate) input: Value,
    pub(crate) user_id: Option<String>,
    pub(crate) run_at_ms: Option<i64>,
    pub(crate) ttl_ms: Option<i64>,
}

impl StartBody {
    pub(crate) fn parse(raw: &[u8]) -> Result<Self, ApiError> {
        let map = object(raw)?;
        reject_unknown(&map, &["gateway_id", "tool_name", "input", "user_id", "run_at", "ttl_ms"])?;
        let input = match map.get("input") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => return Err(invalid("`input` must be a JSON object")),
        };
        let run_at_ms = match map.get("run_at") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => {
                let t = OffsetDateTime::parse(s, &Rfc3339)
                    .map_err(|_| invalid("`run_at` must be an RFC 3339 timestamp"))?;
                Some((t.unix_timestamp_nanos() / 1_000_000) as i64)
            }
            Some(_) => return Err(invalid("`run_at` must be an RFC 3339 timestamp")),
        };
        let ttl_ms = match map.get("ttl_ms") {
            None | Some(Value::Null) => None,
            Some(v) => {
                let ttl = integer(v, "ttl_ms")?;
                if ttl <= 0 {
                    return Err(invalid("`ttl_ms` must be positive"));
                }
                Some(ttl)
            }
        };
        Ok(StartBody {
            gateway_id: required_string(&map, "gateway_id")?,
            tool_name: required_string(&map, "tool_name")?,
            input,
            user_id: optional_string(&map, "user_id")?,
            run_at_ms,
            ttl_ms,
        })
    }

    /// The start this body asks for through `gateway_id`; the client
    /// fingerprints it (`coordinator::fingerprint`).
    pub(crate) fn new_execution<'a>(&'a self, idempotency_key: Option<&'a str>) -> NewExecution<'a> {
        NewExecution {
            user_id: self.user_id.as_deref(),
            run_at_ms: self.run_at_ms,
            ttl_ms: self.ttl_ms,
            idempotency_key,
            ..NewExecution::new(&self.tool_name, &self.input, Surface::Rest)
        }
    }
}

#[derive(Debug)]
pub(crate) struct InputBody {
    pub(crate) request_key: String,
    pub(crate) action: InputAction,
    pub(crate) content: Value,
}

impl InputBody {
    pub(crate) fn parse(raw: &[u8]) -> Result<Self, ApiError> {
        let map = object(raw)?;
        reject_unknown(&map, &["request_key", "response"])?;
        let request_key = required_string(&map, "request_key")?;
        let Some(Value::Object(response)) = map.get("response") else {
            return Err(invalid("`response` must be an object with `action`"));
        };
        reject_unknown(response, &["action", "content"])?;
        let Some(action) = response.get("action").and_then(Value::as_str).and_then(InputAction::from_name) else {
            return Err(invalid("`response.action` must be one of accept, decline, cancel"));
        };
        let content = match response.get("content") {
            None | Some(Value::Null) => Value::Null,
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => return Err(invalid("`response.content` must be an object")),
        };
        Ok(InputBody { request_key, action, content })
    }
}

/// Cancel takes no body; an empty body or `{}` are both fine.
pub(crate) struct CancelBody;

impl CancelBody {
    pub(crate) fn parse(raw: &[u8]) -> Result<Self, ApiError> {
        if raw.iter().all(u8::is_ascii_whitespace) {
            return Ok(CancelBody);
        }
        let map = object(raw)?;
        reject_unknown(&map, &[])?;
        Ok(CancelBody)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_body_names_the_bad_field() {
        let cases: [(&str, &str); 6] = [
            ("[]", "JSON object"),
            ("{", "not valid JSON"),
            (r#"{"tool_name":"T","input":{}}"#, "gateway_id"),
            (r#"{"gateway_id":"g","tool_name":1}"#, "tool_name"),
            (r#"{"gateway_id":"g","tool_name":"T","ttl_ms":"x"}"#, "ttl_ms"),
            (r#"{"gateway_id":"g","tool_name":"T","bogus":1}"#, "bogus"),
        ];
        for (raw, needle) in cases {
            let err = StartBody::parse(raw.as_bytes()).expect_err(raw);
            assert!(err.message().contains(needle), "{raw}: {}", err.message());
        }
    }

    #[test]
    fn integral_floats_are_integers() {
        let b = StartBody::parse(br#"{"gateway_id":"g","tool_name":"T","ttl_ms":5000.0}"#).expect("parse");
        assert_eq!(b.ttl_ms, Some(5000));
    }

    fn fingerprint(raw: &[u8]) -> String {
        let body = StartBody::parse(raw).expect("parse");
        crate::coordinator::fingerprint(&body.gateway_id, &body.new_execution(None))
    }

    #[test]
    fn fingerprint_ignores_key_order() {
        let a = fingerprint(br#"{"gateway_id":"g","tool_name":"T","input":{"a":1,"b":[{"y":1,"x":2}]}}"#);
        let b = fingerprint(br#"{"input":{"b":[{"x":2,"y":1}],"a":1},"tool_name":"T","gateway_id":"g"}"#);
        assert_eq!(a, b);
    }

    #[test]
    fn fingerprint_keeps_its_stored_form() {
        assert_eq!(
            fingerprint(br#"{"tool_name":"T","gateway_id":"g","input":{"b":[{"y":1,"x":2}],"a":1}}"#),
            r#"{"gateway_id":"g","input":{"a":1,"b":[{"x":2,"y":1}]},"run_at_ms":null,"tool_name":"T","ttl_ms":null,"user_id":null}"#
        );
    }
}

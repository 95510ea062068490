//! Validates tool input against the tool's JSON Schema with the `jsonschema`
//! crate: the whole language (`$ref`, `anyOf`/`oneOf`, `pattern`, `format`…),
//! draft 2020-12 unless the schema's `$schema` names another. A schema is
//! compiled once and kept, keyed by its text: a tool version's schema is one
//! text, and a changed schema is simply a new key. Never fetches anything: a
//! `$ref` outside the schema fails to compile, and registration refuses it.

use jsonschema::Validator;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

/// Compiled schemas kept at most; past it the cache starts over (schemas are
/// per tool version, so this is reached only by churn, never per request).
const CACHE_LIMIT: usize = 4_096;

/// Problems quoted back to the caller are cut here: they may echo the input.
const MAX_PROBLEM_CHARS: usize = 300;

/// Input the schema rejects. `path` is the JSON Pointer of the offending value
/// (`/tags/0`), empty for the input itself.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("input at `{}` is invalid: {problem}", display_path(path))]
pub(crate) struct Invalid {
    pub(crate) path: String,
    pub(crate) problem: String,
}

fn display_path(path: &str) -> &str {
    if path.is_empty() { "/" } else { path }
}

/// A schema that does not compile: a worker bug, refused at registration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the input schema is not a valid JSON Schema: {0}")]
pub(crate) struct BadSchema(pub String);

static CACHE: LazyLock<Mutex<HashMap<String, Arc<Validator>>>> = LazyLock::new(Mutex::default);

fn compile(schema: &Value) -> Result<Validator, BadSchema> {
    jsonschema::options().should_validate_formats(true).build(schema).map_err(|e| BadSchema(cut(&e.to_string())))
}

/// The compiled validator of `schema_text`, compiled at most once while cached.
pub(crate) fn validator(schema_text: &str) -> Result<Arc<Validator>, BadSchema> {
    let cached = CACHE.lock().unwrap_or_else(|p| p.into_inner()).get(schema_text).cloned();
    if let Some(v) = cached {
        return Ok(v);
    }
    let schema: Value = serde_json::from_str(schema_text).map_err(|e| BadSchema(e.to_string()))?;
    if !schema.is_object() && !schema.is_boolean() {
        return Err(BadSchema("a schema is a JSON object".into()));
    }
    // Compiled outside the lock: a large schema never stalls other starts.
    let compiled = Arc::new(compile(&schema)?);
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if cache.len() >= CACHE_LIMIT {
        cache.clear();
    }
    cache.insert(schema_text.to_owned(), compiled.clone());
    Ok(compiled)
}

/// Checks that `schema_text` compiles (at registration).
pub(crate) fn check(schema_text: &str) -> Result<(), BadSchema> {
    validator(schema_text).map(|_| ())
}

/// Validates `input`; the first error names where it is.
pub(crate) fn validate(validator: &Validator, input: &Value) -> Result<(), Invalid> {
    match validator.iter_errors(input).next() {
        None => Ok(()),
        Some(e) => Err(Invalid { path: e.instance_path().as_str().to_owned(), problem: cut(&e.to_string()) }),
    }
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_PROBLEM_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check_input(schema: &Value, input: &Value) -> Result<(), Invalid> {
        let v = validator(&schema.to_string()).expect("schema compiles");
        validate(&v, input)
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "text": {"type": "string", "maxLength": 5},
                "seconds": {"type": "number", "minimum": 0},
                "mode": {"enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "nested": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
            },
            "required": ["text"],
            "additionalProperties": false
        })
    }

    #[test]
    fn accepts_valid_input() {
        let ok = json!({"text": "hi", "seconds": 1.5, "mode": "a", "tags": ["x"], "nested": {"n": 2}});
        assert_eq!(check_input(&schema(), &ok), Ok(()));
    }

    #[test]
    fn names_the_offending_path() {
        let cases = [
            (json!({}), ""),
            (json!({"text": 3}), "/text"),
            (json!({"text": "toolong"}), "/text"),
            (json!({"text": "a", "seconds": -1}), "/seconds"),
            (json!({"text": "a", "mode": "c"}), "/mode"),
            (json!({"text": "a", "tags": [1]}), "/tags/0"),
            (json!({"text": "a", "nested": {}}), "/nested"),
            (json!({"text": "a", "extra": 1}), ""),
            (json!([1]), ""),
        ];
        for (input, path) in cases {
            let err = check_input(&schema(), &input).expect_err("invalid");
            assert_eq!(err.path, path, "{input}: {err}");
        }
        let missing = check_input(&schema(), &json!({})).expect_err("invalid");
        assert!(missing.to_string().contains("\"text\""), "a missing property is named: {missing}");
    }

    #[test]
    fn any_of_is_checked() {
        let s = json!({
            "type": "object",
            "properties": {"id": {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^u-"}]}}
        });
        assert_eq!(check_input(&s, &json!({"id": 7})), Ok(()));
        assert_eq!(check_input(&s, &json!({"id": "u-1"})), Ok(()));
        let err = check_input(&s, &json!({"id": "x"})).expect_err("neither branch");
        assert_eq!(err.path, "/id");
        assert!(err.to_string().contains("input at `/id`"), "{err}");
    }

    #[test]
    fn pattern_is_checked() {
        let s = json!({"type": "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]+$"}}});
        assert_eq!(check_input(&s, &json!({"sku": "ABC-12"})), Ok(()));
        let err = check_input(&s, &json!({"sku": "abc"})).expect_err("pattern");
        assert_eq!(err.path, "/sku");
    }

    /// Pydantic puts nested models under `$defs` and points at them with `$ref`.
    #[test]
    fn refs_are_followed() {
        let s = json!({
            "$defs": {"Address": {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["zip"]}},
            "type": "object",
            "properties": {"to": {"$ref": "#/$defs/Address"}},
            "required": ["to"]
        });
        assert_eq!(check_input(&s, &json!({"to": {"zip": "12345"}})), Ok(()));
        assert_eq!(check_input(&s, &json!({"to": {"zip": "12"}})).expect_err("ref").path, "/to/zip");
        assert_eq!(check_input(&s, &json!({"to": {}})).expect_err("ref").path, "/to");
    }

    #[test]
    fn formats_are_checked() {
        let s = json!({"type": "object", "properties": {
            "email": {"type": "string", "format": "email"},
            "when": {"type": "string", "format": "date-time"}
        }});
        assert_eq!(check_input(&s, &json!({"email": "a@example.com", "when": "2026-07-28T10:00:00Z"})), Ok(()));
        assert_eq!(check_input(&s, &json!({"email": "not an address"})).expect_err("email").path, "/email");
        assert_eq!(check_input(&s, &json!({"when": "yesterday"})).expect_err("date-time").path, "/when");
    }

    #[test]
    fn one_of_and_integers_follow_2020_12() {
        let s = json!({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 10}]});
        assert_eq!(check_input(&s, &json!(3)), Ok(()));
        assert!(check_input(&s, &json!(12)).is_err(), "both branches match");
        assert_eq!(check_input(&json!({"type": "integer"}), &json!(2.0)), Ok(()), "2.0 is an integer");
    }

    #[test]
    fn schemas_that_do_not_compile_or_fetch_are_refused() {
        assert!(check(r#"{"type": 3}"#).is_err());
        assert!(check("not json").is_err());
        assert!(check(r#"{"$ref": "https://example.com/schema.json"}"#).is_err(), "never fetched");
        assert!(check(r#"{"type": "object"}"#).is_ok());
    }

    #[test]
    fn a_schema_is_compiled_once() {
        let text = r#"{"type":"object","title":"compiled once"}"#;
        let a = validator(text).expect("compiles");
        let b = validator(text).expect("compiles");
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn long_problems_are_cut() {
        let s = json!({"type": "object", "properties": {"t": {"type": "integer"}}});
        let long = "x".repeat(5_000);
        let err = check_input(&s, &json!({ "t": long })).expect_err("type");
        assert!(err.problem.chars().count() <= MAX_PROBLEM_CHARS + 1);
    }
}

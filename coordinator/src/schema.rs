//! Validates tool input against the subset of JSON Schema tool authors use:
//! `type`, `properties`, `required`, `additionalProperties: false`, `enum`,
//! `items`, `minimum`/`maximum`, `minLength`/`maxLength`. Keywords outside the
//! subset are ignored (accepting), never misapplied. Errors name the field.

use serde_json::Value;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("input field `{path}` {problem}")]
pub struct Invalid {
    pub path: String,
    pub problem: String,
}

fn type_matches(expected: &str, v: &Value) -> bool {
    match expected {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => v.as_i64().is_some() || v.as_u64().is_some() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => true,
    }
}

pub fn validate(schema: &Value, input: &Value) -> Result<(), Invalid> {
    check(schema, input, "")
}

fn fail(path: &str, problem: impl Into<String>) -> Result<(), Invalid> {
    Err(Invalid { path: if path.is_empty() { "(root)".into() } else { path.to_owned() }, problem: problem.into() })
}

fn check(schema: &Value, v: &Value, path: &str) -> Result<(), Invalid> {
    let Some(s) = schema.as_object() else { return Ok(()) };
    match s.get("type") {
        Some(Value::String(t)) if !type_matches(t, v) => return fail(path, format!("must be of type {t}")),
        Some(Value::Array(ts)) if !ts.iter().filter_map(Value::as_str).any(|t| type_matches(t, v)) => {
            return fail(path, "has the wrong type");
        }
        _ => {}
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(v)
    {
        return fail(path, "is not one of the allowed values");
    }
    if let Some(n) = v.as_f64() {
        if s.get("minimum").and_then(Value::as_f64).is_some_and(|min| n < min) {
            return fail(path, "is below the minimum");
        }
        if s.get("maximum").and_then(Value::as_f64).is_some_and(|max| n > max) {
            return fail(path, "is above the maximum");
        }
    }
    if let Some(text) = v.as_str() {
        let len = text.chars().count() as u64;
        if s.get("minLength").and_then(Value::as_u64).is_some_and(|min| len < min) {
            return fail(path, "is too short");
        }
        if s.get("maxLength").and_then(Value::as_u64).is_some_and(|max| len > max) {
            return fail(path, "is too long");
        }
    }
    if let Some(obj) = v.as_object() {
        let props = s.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(required)) = s.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !obj.contains_key(name) {
                    return fail(&join(path, name), "is required");
                }
            }
        }
        for (name, value) in obj {
            match props.and_then(|p| p.get(name)) {
                Some(sub) => check(sub, value, &join(path, name))?,
                None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return fail(&join(path, name), "is not allowed");
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        for (i, item) in arr.iter().enumerate() {
            check(items, item, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        let ok = json!({"text": "hi", "seconds": 1.5, "mode": "a", "tags": ["x"], "nested": {"n": 2.0}});
        assert_eq!(validate(&schema(), &ok), Ok(()));
    }

    #[test]
    fn names_the_offending_field() {
        let cases = [
            (json!({}), "text"),
            (json!({"text": 3}), "text"),
            (json!({"text": "toolong"}), "text"),
            (json!({"text": "a", "seconds": -1}), "seconds"),
            (json!({"text": "a", "mode": "c"}), "mode"),
            (json!({"text": "a", "tags": [1]}), "tags[0]"),
            (json!({"text": "a", "nested": {}}), "nested.n"),
            (json!({"text": "a", "extra": 1}), "extra"),
            (json!([1]), "(root)"),
        ];
        for (input, field) in cases {
            let err = validate(&schema(), &input).expect_err("invalid");
            assert_eq!(err.path, field, "{input}");
        }
    }
}

//! JSON-RPC 2.0 framing: classifies one POSTed message as a request, a
//! notification or a client response, and builds outgoing messages. Knows
//! nothing about MCP methods.

use super::error::RpcError;
use serde_json::{Map, Value, json};

#[derive(Debug)]
pub(super) enum Message {
    Request {
        id: Value,
        method: String,
        params: Map<String, Value>,
    },
    Notification,
    /// A client's answer to a server→client request; `result` is `None` when
    /// the client answered with an error.
    Response {
        id: Value,
        result: Option<Value>,
    },
}

impl Message {
    pub(super) fn parse(raw: &[u8]) -> Result<Message, RpcError> {
        let value: Value = serde_json::from_slice(raw).map_err(|_| RpcError::parse_error())?;
        let Value::Object(mut map) = value else {
            if value.is_array() {
                return Err(RpcError::invalid_request("batches are not supported"));
            }
            return Err(RpcError::invalid_request("a JSON-RPC message must be an object"));
        };
        if map.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(RpcError::invalid_request("`jsonrpc` must be \"2.0\""));
        }
        let id = map.remove("id");
        if let Some(id) = &id
            && !(id.is_string() || id.is_number())
        {
            return Err(RpcError::invalid_request("`id` must be a string or a number"));
        }
        match map.remove("method") {
            Some(Value::String(method)) => {
                let params = match map.remove("params") {
                    None | Some(Value::Null) => Map::new(),
                    Some(Value::Object(p)) => p,
                    Some(_) => return Err(RpcError::invalid_request("`params` must be an object")),
                };
                Ok(match id {
                    Some(id) => Message::Request { id, method, params },
                    None => Message::Notification,
                })
            }
            Some(_) => Err(RpcError::invalid_request("`method` must be a string")),
            None => match id {
                Some(id) if map.contains_key("result") || map.contains_key("error") => {
                    Ok(Message::Response { id, result: map.remove("result") })
                }
                _ => Err(RpcError::invalid_request("not a JSON-RPC request, notification or response")),
            },
        }
    }
}

pub(super) fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub(super) fn request(id: &str, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A string parameter, if present and a string.
pub(super) fn str_param<'a>(params: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    params.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::error::{INVALID_REQUEST, PARSE_ERROR};

    #[test]
    fn classifies_messages() {
        let m = Message::parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).expect("request");
        assert!(matches!(m, Message::Request { ref method, .. } if method == "ping"));
        let m = Message::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).expect("notification");
        assert!(matches!(m, Message::Notification));
        let m = Message::parse(br#"{"jsonrpc":"2.0","id":"x","result":{}}"#).expect("response");
        assert!(matches!(m, Message::Response { .. }));
    }

    #[test]
    fn rejects_malformed_messages() {
        assert_eq!(Message::parse(b"{").expect_err("json").code, PARSE_ERROR);
        for raw in [
            &br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#[..],
            br#"{"id":1,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#,
            br#"{"jsonrpc":"2.0","id":1}"#,
        ] {
            assert_eq!(Message::parse(raw).expect_err("invalid").code, INVALID_REQUEST);
        }
    }
}

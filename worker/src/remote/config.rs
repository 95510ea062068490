//! How a worker is told about a remote MCP server (`worker.remote_servers` in
//! the configuration file). Credentials are secrets: `Debug` never prints them,
//! and nothing in the worker logs a header value.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A credential or header value that must never reach a log line.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Which task dialect to speak; `auto` asks the server (`server/discover`
/// first, then `initialize`).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum Protocol {
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// The 2025-11-25 core tasks utility (sessions, `tasks/result`).
    #[serde(rename = "2025-11-25")]
    V2025,
    /// 2026-07-28 with the `io.modelcontextprotocol/tasks` extension.
    #[serde(rename = "2026-07-28")]
    V2026,
}

/// One remote MCP server served through this worker.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteServer {
    /// The Streamable HTTP endpoint, e.g. `http://127.0.0.1:8000/mcp`.
    pub url: String,
    /// Sent as `Authorization: Bearer …`.
    #[serde(default)]
    pub bearer_token: Option<Secret>,
    /// Extra request headers (API keys and the like).
    #[serde(default)]
    pub headers: BTreeMap<String, Secret>,
    /// Defaults to the server's own name.
    #[serde(default)]
    pub toolkit_name: Option<String>,
    /// Defaults to the server's own version.
    #[serde(default)]
    pub toolkit_version: Option<String>,
    /// Tools to expose; empty exposes every tool the server lists.
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub protocol: Protocol,
    /// PEM CA bundle that alone verifies an `https://` server (a private CA);
    /// without it the system trust store is used.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

impl RemoteServer {
    pub fn new(url: impl Into<String>) -> Self {
        RemoteServer {
            url: url.into(),
            bearer_token: None,
            headers: BTreeMap::new(),
            toolkit_name: None,
            toolkit_version: None,
            tools: Vec::new(),
            protocol: Protocol::Auto,
            ca_file: None,
        }
    }

    /// The URL without credentials, query or fragment: safe to log.
    pub fn display_url(&self) -> String {
        let without_query = self.url.split(['?', '#']).next().unwrap_or_default();
        match without_query.split_once("://") {
            Some((scheme, rest)) => {
                let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
                format!("{scheme}://{rest}")
            }
            None => without_query.to_owned(),
        }
    }

    /// Checks what can be checked without contacting the server.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            return Err(format!("url {:?} must be http:// or https://", self.display_url()));
        }
        if let Some(path) = &self.ca_file {
            if !self.url.starts_with("https://") {
                return Err("ca_file is set but the url is not https://".into());
            }
            self.root_certificates().map_err(|problem| format!("ca_file {}: {problem}", path.display()))?;
        }
        for name in self.headers.keys() {
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(format!("header name {name:?} is not a valid HTTP header name"));
            }
        }
        for (name, value) in &self.headers {
            if reqwest::header::HeaderValue::from_str(value.expose()).is_err() {
                return Err(format!("the value of header {name:?} is not a valid HTTP header value"));
            }
        }
        Ok(())
    }

    /// The certificates of `ca_file` (none when it is unset).
    pub fn root_certificates(&self) -> Result<Vec<reqwest::Certificate>, String> {
        let Some(path) = &self.ca_file else { return Ok(Vec::new()) };
        let pem = std::fs::read(path).map_err(|e| e.to_string())?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|_| "is not a PEM certificate bundle")?;
        if certs.is_empty() {
            return Err("holds no PEM certificate".into());
        }
        Ok(certs)
    }
}

impl std::fmt::Debug for RemoteServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteServer")
            .field("url", &self.display_url())
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "<redacted>"))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("toolkit_name", &self.toolkit_name)
            .field("toolkit_version", &self.toolkit_version)
            .field("tools", &self.tools)
            .field("protocol", &self.protocol)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_secrets() {
        let mut s = RemoteServer::new("http://user:pw@example.test:8/mcp?key=abc");
        s.bearer_token = Some(Secret::new("tok-123"));
        s.headers.insert("X-Api-Key".into(), Secret::new("key-456"));
        let shown = format!("{s:?}");
        for secret in ["tok-123", "key-456", "pw", "abc"] {
            assert!(!shown.contains(secret), "{secret} leaked: {shown}");
        }
        assert!(shown.contains("http://example.test:8/mcp"), "{shown}");
    }

    #[test]
    fn a_ca_file_needs_https_and_a_readable_pem_bundle() {
        let mut s = RemoteServer::new("http://127.0.0.1:1/mcp");
        assert!(s.validate().is_ok());
        s.ca_file = Some(std::env::temp_dir().join("baton-no-such-ca.pem"));
        assert!(s.validate().expect_err("http").contains("https"));
        s.url = "https://127.0.0.1:1/mcp".into();
        assert!(s.validate().expect_err("missing").contains("ca_file"));
        let garbage = std::env::temp_dir().join(format!("baton-garbage-ca-{}.pem", std::process::id()));
        std::fs::write(&garbage, "no certificate here").expect("write");
        s.ca_file = Some(garbage);
        assert!(s.validate().expect_err("garbage").contains("ca_file"));
        s.ca_file = None;
        assert!(s.validate().is_ok(), "https with the system trust store");
    }

    #[test]
    fn parses_yaml_flow() {
        let v: Vec<RemoteServer> = serde_json::from_value(serde_json::json!([
            {"url": "http://127.0.0.1:1/mcp", "tools": ["a"], "protocol": "2025-11-25", "headers": {"X-K": "v"}}
        ]))
        .expect("parses");
        assert_eq!(v[0].protocol, Protocol::V2025);
        assert_eq!(v[0].headers["X-K"].expose(), "v");
    }
}

//! The one HTTP client of `baton executions`: builds project-scoped URLs
//! (ids percent-encoded as path segments), sends the key as a bearer token,
//! and turns the API's error body into a message for a person.

use super::Target;
use reqwest::{Method, StatusCode, Url};
use serde_json::Value;
use std::time::Duration;

/// A request gets this long; the history routes answer from indexed reads.
const TIMEOUT: Duration = Duration::from_secs(60);
/// The most of an unexpected (non-JSON) error body shown.
const BODY_EXCERPT: usize = 300;

#[derive(Debug, thiserror::Error)]
pub(super) enum Error {
    #[error("BATON_URL (--url) {url:?} is not an http(s) URL")]
    BadUrl { url: String },
    #[error("cannot reach the gateway at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// The API refused: its status, code and message as it sent them.
    #[error("{}", refusal(*status, code, message))]
    Refused { status: StatusCode, code: String, message: String },
    #[error("the gateway answered {status} with a body that is not the API's JSON: {excerpt}")]
    BadReply { status: StatusCode, excerpt: String },
}

fn refusal(status: StatusCode, code: &str, message: &str) -> String {
    let hint = match status.as_u16() {
        401 => " (check BATON_API_KEY: is it a live key of this project?)",
        403 => " (the key's role or permissions do not allow this)",
        404 => " (unknown here: check the id, BATON_ORG and BATON_PROJECT)",
        _ => "",
    };
    let code = if code.is_empty() { String::new() } else { format!(" {code}") };
    format!("refused: {status}{code}: {message}{hint}")
}

impl Error {
    pub(super) fn exit_code(&self) -> u8 {
        match self {
            Error::BadUrl { .. } => 64,
            Error::Unreachable { .. } => 69,
            Error::Refused { status, .. } if matches!(status.as_u16(), 401 | 403) => 3,
            Error::Refused { status, .. } if status.as_u16() == 404 => 4,
            Error::Refused { .. } | Error::BadReply { .. } => 1,
        }
    }
}

pub(super) struct Client {
    http: reqwest::Client,
    /// `{url}/v1/orgs/{org}/projects/{project}`
    base: Url,
    api_key: String,
}

impl Client {
    pub(super) fn new(target: &Target) -> Result<Client, Error> {
        let bad = || Error::BadUrl { url: target.url.clone() };
        let mut base = Url::parse(&target.url).map_err(|_| bad())?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(bad());
        }
        base.path_segments_mut().map_err(|()| bad())?.pop_if_empty().extend([
            "v1",
            "orgs",
            &target.org,
            "projects",
            &target.project,
        ]);
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .map_err(|e| Error::Unreachable { url: target.url.clone(), reason: e.to_string() })?;
        Ok(Client { http, base, api_key: target.api_key.clone() })
    }

    fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        url
    }

    pub(super) async fn get(&self, segments: &[&str], query: &[(&str, String)]) -> Result<Value, Error> {
        self.send(Method::GET, self.url(segments, query)).await
    }

    /// A POST with an empty JSON object (the cancel routes take no fields).
    pub(super) async fn post(&self, segments: &[&str]) -> Result<Value, Error> {
        self.send(Method::POST, self.url(segments, &[])).await
    }

    async fn send(&self, method: Method, url: Url) -> Result<Value, Error> {
        let shown = format!("{}://{}", url.scheme(), url.authority());
        let mut request = self.http.request(method.clone(), url).bearer_auth(&self.api_key);
        if method == Method::POST {
            request = request.json(&serde_json::json!({}));
        }
        let response = request
            .send()
            .await
            .map_err(|e| Error::Unreachable { url: shown, reason: baton_proto::error::with_sources(&e) })?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| Error::BadReply { status, excerpt: e.to_string() })?;
        let body: Option<Value> = serde_json::from_slice(&bytes).ok();
        if status.is_success() {
            return body.ok_or_else(|| Error::BadReply { status, excerpt: excerpt(&bytes) });
        }
        match body.as_ref().and_then(|b| b.get("error")) {
            Some(e) => Err(Error::Refused {
                status,
                code: e["code"].as_str().unwrap_or_default().to_owned(),
                message: e["message"].as_str().unwrap_or_default().to_owned(),
            }),
            None => Err(Error::BadReply { status, excerpt: excerpt(&bytes) }),
        }
    }
}

fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text: String = text.chars().filter(|c| !c.is_control()).take(BODY_EXCERPT).collect();
    if text.is_empty() { "(empty)".to_owned() } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Target {
        // reqwest is built without a TLS provider of its own (`main` installs ring).
        crate::tls::install_crypto_provider();
        Target { url: url.into(), api_key: "k".into(), org: "org/1".into(), project: "p 1".into(), json: false }
    }

    #[test]
    fn urls_keep_a_prefix_and_encode_ids() {
        let c = Client::new(&target("http://gw.example:8080/baton/")).expect("client");
        let url = c.url(&["tool_executions", "te_x"], &[("tool_name", "A&B".into())]);
        assert_eq!(
            url.as_str(),
            "http://gw.example:8080/baton/v1/orgs/org%2F1/projects/p%201/tool_executions/te_x?tool_name=A%26B"
        );
    }

    #[test]
    fn only_http_urls_are_accepted() {
        for bad in ["gw.example:8080", "ftp://gw.example", "mailto:x@y", ""] {
            assert!(matches!(Client::new(&target(bad)), Err(Error::BadUrl { .. })), "{bad}");
        }
    }

    #[test]
    fn refusals_map_to_exit_codes_and_keep_the_api_message() {
        let refused = |s: u16| Error::Refused {
            status: StatusCode::from_u16(s).expect("status"),
            code: "forbidden".into(),
            message: "include_inputs and include_outputs need an admin API key".into(),
        };
        assert_eq!([401, 403, 404, 400, 503].map(|s| refused(s).exit_code()), [3, 3, 4, 1, 1]);
        let text = refused(403).to_string();
        assert!(text.contains("403 Forbidden forbidden: include_inputs"), "{text}");
    }
}

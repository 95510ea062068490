//! What both eras check and read in HTTP headers, before and besides the
//! message: DNS-rebinding protection (`Host` and `Origin` must name a loopback
//! host or one of `options.allowed_hosts`), the `Accept` / `Content-Type`
//! negotiation of Streamable HTTP, and MCP header values (trimmed, the
//! `=?base64?…?=` form decoded). `legacy` and `modern` share it; neither
//! imports the other. Owns no JSON-RPC logic.

use base64::Engine;
use http::{HeaderMap, header};

/// The protocol version header both eras send (with different rules).
pub(crate) const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";

const LOOPBACK: [&str; 4] = ["localhost", "127.0.0.1", "[::1]", "::1"];

/// True when the `Host` (or URI authority) and any `Origin` are acceptable.
/// A refusal is logged naming the setting: behind an Ingress the usual cause
/// is a public host name missing from `gateway.allowed_hosts`.
pub(crate) fn host_and_origin_allowed(headers: &HeaderMap, authority: Option<&str>, allowed: &[String]) -> bool {
    let ok = host_and_origin_checked(headers, authority, allowed);
    if !ok {
        let (host, origin) = (headers.get(header::HOST), headers.get(header::ORIGIN));
        tracing::warn!(
            ?host,
            ?origin,
            "MCP request refused (403): Host or Origin is neither loopback nor in gateway.allowed_hosts (Helm value gateway.allowedHosts)"
        );
    }
    ok
}

fn host_and_origin_checked(headers: &HeaderMap, authority: Option<&str>, allowed: &[String]) -> bool {
    let host = match headers.get(header::HOST) {
        Some(v) => match v.to_str() {
            Ok(h) => Some(h),
            Err(_) => return false,
        },
        None => authority,
    };
    if let Some(host) = host
        && !authority_allowed(host, allowed)
    {
        return false;
    }
    match headers.get(header::ORIGIN) {
        None => true,
        Some(v) => {
            let Ok(origin) = v.to_str() else { return false };
            match origin.split_once("://") {
                Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https") => {
                    let authority = rest.split('/').next().unwrap_or_default();
                    authority_allowed(authority, allowed)
                }
                // `Origin: null` and other schemes come from contexts we cannot vouch for.
                _ => false,
            }
        }
    }
}

/// `host[:port]`, compared without the port against loopback names, and with
/// or without it against the configured list.
pub(crate) fn authority_allowed(authority: &str, allowed: &[String]) -> bool {
    let authority = authority.trim();
    if authority.is_empty() || authority.contains('@') {
        return false;
    }
    let host = hostname(authority);
    if LOOPBACK.iter().any(|l| l.eq_ignore_ascii_case(host)) {
        return true;
    }
    allowed.iter().any(|a| a.eq_ignore_ascii_case(authority) || a.eq_ignore_ascii_case(host))
}

fn hostname(authority: &str) -> &str {
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(end) => &authority[..=end],
            None => authority,
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    }
}

/// What the client's `Accept` header admits.
pub(crate) struct Accepts {
    pub(crate) json: bool,
    pub(crate) sse: bool,
}

pub(crate) fn accepts(headers: &HeaderMap) -> Accepts {
    let mut out = Accepts { json: false, sse: false };
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for range in value.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
            let refused = parts.any(|p| {
                let p = p.trim().to_ascii_lowercase();
                p == "q=0" || p == "q=0.0" || p == "q=0.00" || p == "q=0.000"
            });
            if refused {
                continue;
            }
            match media.as_str() {
                "*/*" => {
                    out.json = true;
                    out.sse = true;
                }
                "application/json" | "application/*" => out.json = true,
                "text/event-stream" | "text/*" => out.sse = true,
                _ => {}
            }
        }
    }
    out
}

pub(crate) fn content_type_is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// A header value that is not text, or not valid in its `=?base64?…?=` form.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("the header value is not valid text")]
pub(crate) struct BadHeader;

/// A header value with surrounding whitespace removed and the
/// `=?base64?…?=` form decoded.
pub(crate) fn header(headers: &HeaderMap, name: &str) -> Result<Option<String>, BadHeader> {
    let Some(value) = headers.get(name) else { return Ok(None) };
    let text = value.to_str().map_err(|_| BadHeader)?.trim_matches([' ', '\t']);
    if let Some(encoded) = text.strip_prefix("=?base64?").and_then(|r| r.strip_suffix("?=")) {
        let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|_| BadHeader)?;
        return String::from_utf8(bytes).map(Some).map_err(|_| BadHeader);
    }
    Ok(Some(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k.clone(), HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn loopback_names_pass_with_and_without_port() {
        for host in ["localhost", "localhost:8080", "127.0.0.1:3000", "[::1]:9", "[::1]", "LOCALHOST"] {
            let h = headers(&[(header::HOST, host)]);
            assert!(host_and_origin_allowed(&h, None, &[]), "{host}");
        }
    }

    #[test]
    fn foreign_host_or_origin_is_refused() {
        let h = headers(&[(header::HOST, "evil.example.com")]);
        assert!(!host_and_origin_allowed(&h, None, &[]));
        let h = headers(&[(header::HOST, "localhost:1"), (header::ORIGIN, "http://evil.example.com")]);
        assert!(!host_and_origin_allowed(&h, None, &[]));
        let h = headers(&[(header::HOST, "localhost:1"), (header::ORIGIN, "null")]);
        assert!(!host_and_origin_allowed(&h, None, &[]));
        let h = headers(&[(header::HOST, "localhost.evil.com")]);
        assert!(!host_and_origin_allowed(&h, None, &[]));
    }

    #[test]
    fn configured_hosts_pass() {
        let allowed = vec!["api.example.com".to_owned()];
        let h = headers(&[(header::HOST, "api.example.com"), (header::ORIGIN, "https://api.example.com")]);
        assert!(host_and_origin_allowed(&h, None, &allowed));
    }

    #[test]
    fn accept_needs_both_types() {
        let a = accepts(&headers(&[(header::ACCEPT, "application/json, text/event-stream")]));
        assert!(a.json && a.sse);
        let a = accepts(&headers(&[(header::ACCEPT, "application/json")]));
        assert!(a.json && !a.sse);
        let a = accepts(&headers(&[(header::ACCEPT, "*/*")]));
        assert!(a.json && a.sse);
        let a = accepts(&headers(&[(header::ACCEPT, "application/json, text/event-stream;q=0")]));
        assert!(!a.sse);
    }

    #[test]
    fn base64_header_values_are_decoded_and_trimmed() {
        let mut h = HeaderMap::new();
        h.insert("mcp-name", HeaderValue::from_static("  =?base64?w6lsw6h2ZQ==?=  "));
        assert_eq!(header(&h, "mcp-name"), Ok(Some("élève".to_owned())));
        h.insert("mcp-name", HeaderValue::from_static("\tgreet "));
        assert_eq!(header(&h, "mcp-name"), Ok(Some("greet".to_owned())));
    }
}

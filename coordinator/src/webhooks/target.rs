//! Which webhook targets may be called. The spec of Standard Webhooks asks
//! senders to protect against server-side request forgery: a target that
//! resolves to a loopback, private, link-local or otherwise non-public address
//! is refused unless configuration allows it. The check runs when an endpoint
//! is created and again on every connection (the delivery client resolves
//! names through [`GuardedResolver`]), so a name re-pointed at an internal
//! address later is not reached either. Redirects are never followed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// What an address is, for the purpose of being called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Public,
    Loopback,
    /// Private, link-local, unique-local, shared, unspecified, multicast, reserved.
    Internal,
}

pub fn classify(ip: IpAddr) -> Class {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

fn classify_v4(ip: Ipv4Addr) -> Class {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Class::Loopback
    } else if ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        // shared address space (carrier-grade NAT), 100.64.0.0/10
        || (a == 100 && (64..128).contains(&b))
        // IETF protocol assignments, 192.0.0.0/24; benchmarking, 198.18.0.0/15
        || (a == 192 && b == 0 && ip.octets()[2] == 0)
        || (a == 198 && (18..20).contains(&b))
        // reserved, 240.0.0.0/4
        || a >= 240
    {
        Class::Internal
    } else {
        Class::Public
    }
}

fn classify_v6(ip: Ipv6Addr) -> Class {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Class::Loopback
    } else if ip.is_unspecified()
        || ip.is_multicast()
        // unique local fc00::/7, link-local fe80::/10, site-local fec0::/10
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || (first & 0xffc0) == 0xfec0
        // documentation 2001:db8::/32
        || (first == 0x2001 && ip.segments()[1] == 0x0db8)
    {
        Class::Internal
    } else {
        Class::Public
    }
}

/// The address policy of one coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub allow_loopback: bool,
    pub allow_private: bool,
}

impl Policy {
    pub fn from_options(o: &super::Options) -> Policy {
        Policy { allow_loopback: o.allow_loopback_targets, allow_private: o.allow_private_targets }
    }

    pub fn allows(self, ip: IpAddr) -> bool {
        match classify(ip) {
            Class::Public => true,
            Class::Loopback => self.allow_loopback || self.allow_private,
            Class::Internal => self.allow_private,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("`url` must be an absolute http or https URL of at most 2048 characters")]
    Malformed,
    #[error("`url` must not carry credentials")]
    Credentials,
    #[error("`url` host does not resolve")]
    Unresolvable,
    #[error("`url` resolves to a loopback, private or link-local address, which this deployment does not allow")]
    Forbidden,
}

/// Checks a URL's shape (before any lookup): absolute http(s), a host, no userinfo.
pub fn parse(url: &str) -> Result<reqwest::Url, Error> {
    if url.len() > 2048 {
        return Err(Error::Malformed);
    }
    let parsed = reqwest::Url::parse(url).map_err(|_| Error::Malformed)?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none_or(str::is_empty) {
        return Err(Error::Malformed);
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(Error::Credentials);
    }
    Ok(parsed)
}

/// The IP literal of a URL's host, if it is one (`[…]` around IPv6).
fn literal(url: &reqwest::Url) -> Option<IpAddr> {
    url.host_str()?.trim_start_matches('[').trim_end_matches(']').parse().ok()
}

/// Checks a target before it is stored: every address it resolves to now must be allowed.
pub async fn check(url: &str, policy: Policy) -> Result<reqwest::Url, Error> {
    let parsed = parse(url)?;
    let addrs: Vec<IpAddr> = match literal(&parsed) {
        Some(ip) => vec![ip],
        None => {
            let host = parsed.host_str().ok_or(Error::Malformed)?;
            let port = parsed.port_or_known_default().unwrap_or(443);
            tokio::net::lookup_host((host, port)).await.map_err(|_| Error::Unresolvable)?.map(|a| a.ip()).collect()
        }
    };
    if addrs.is_empty() {
        return Err(Error::Unresolvable);
    }
    if addrs.iter().all(|ip| policy.allows(*ip)) { Ok(parsed) } else { Err(Error::Forbidden) }
}

/// Whether a URL about to be called names an allowed IP literal (names are
/// checked by the resolver as they are looked up).
pub fn literal_allowed(url: &reqwest::Url, policy: Policy) -> bool {
    literal(url).is_none_or(|ip| policy.allows(ip))
}

/// The delivery client's resolver: system lookups with refused addresses
/// dropped; a name left with none fails to connect.
pub struct GuardedResolver {
    pub policy: Policy,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found.into_iter().filter(|a| policy.allows(a.ip())).collect();
            if allowed.is_empty() {
                return Err(Box::new(Error::Forbidden) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn addresses_are_classified() {
        for s in ["127.0.0.1", "127.8.9.1", "::1", "::ffff:127.0.0.1"] {
            assert_eq!(classify(ip(s)), Class::Loopback, "{s}");
        }
        for s in [
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "fd00::1",
            "fe80::1",
            "::",
            "::ffff:10.0.0.1",
            "224.0.0.1",
        ] {
            assert_eq!(classify(ip(s)), Class::Internal, "{s}");
        }
        for s in ["93.184.215.14", "8.8.8.8", "2606:4700::1111", "172.32.0.1"] {
            assert_eq!(classify(ip(s)), Class::Public, "{s}");
        }
    }

    #[test]
    fn policy_allows_what_configuration_says() {
        let strict = Policy { allow_loopback: false, allow_private: false };
        let dev = Policy { allow_loopback: true, allow_private: false };
        let open = Policy { allow_loopback: false, allow_private: true };
        assert!(!strict.allows(ip("127.0.0.1")) && !strict.allows(ip("10.0.0.1")));
        assert!(dev.allows(ip("127.0.0.1")) && !dev.allows(ip("10.0.0.1")));
        assert!(open.allows(ip("127.0.0.1")) && open.allows(ip("169.254.169.254")));
        assert!(strict.allows(ip("8.8.8.8")));
    }

    #[tokio::test]
    async fn targets_are_checked_before_they_are_stored() {
        let strict = Policy { allow_loopback: false, allow_private: false };
        let dev = Policy { allow_loopback: true, allow_private: false };
        assert_eq!(check("http://127.0.0.1:9/h", strict).await.err(), Some(Error::Forbidden));
        assert_eq!(check("http://localhost:9/h", strict).await.err(), Some(Error::Forbidden));
        assert!(check("http://127.0.0.1:9/h", dev).await.is_ok());
        assert_eq!(check("http://10.0.0.7/h", dev).await.err(), Some(Error::Forbidden));
        assert_eq!(check("http://[fe80::1]/h", dev).await.err(), Some(Error::Forbidden));
        assert_eq!(check("ftp://example.com/", dev).await.err(), Some(Error::Malformed));
        assert_eq!(check("/relative", dev).await.err(), Some(Error::Malformed));
        assert_eq!(check("http://u:p@127.0.0.1/", dev).await.err(), Some(Error::Credentials));
    }
}

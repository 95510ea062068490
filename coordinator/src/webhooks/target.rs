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
pub(crate) enum Class {
    Public,
    Loopback,
    /// Private, link-local, unique-local, shared, unspecified, multicast, reserved.
    Internal,
}

pub(crate) fn classify(ip: IpAddr) -> Class {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// The stricter of two classes: an address carrying two IPv4 addresses
/// (Teredo) is judged by the worse of them.
fn stricter(a: Class, b: Class) -> Class {
    match (a, b) {
        (Class::Internal, _) | (_, Class::Internal) => Class::Internal,
        (Class::Loopback, _) | (_, Class::Loopback) => Class::Loopback,
        _ => Class::Public,
    }
}

/// The IPv4 address(es) an IPv6 address carries, by the transition schemes
/// that route it to that IPv4 host: behind NAT64, a 6to4 relay or a Teredo
/// server, `[64:ff9b::7f00:1]` reaches 127.0.0.1, so it is judged as such.
fn embedded_v4(ip: Ipv6Addr) -> Option<(Ipv4Addr, Option<Ipv4Addr>)> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        // IPv4-mapped ::ffff:0:0/96 and IPv4-translated ::ffff:0:0:0/96 (SIIT).
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0xffff, 0, _, _] => Some((low, None)),
        // IPv4-compatible ::/96 (deprecated); `::` and `::1` are IPv6's own.
        [0, 0, 0, 0, 0, 0, hi, lo] if hi != 0 || lo > 1 => Some((low, None)),
        // NAT64 well-known prefix 64:ff9b::/96.
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some((low, None)),
        // 6to4 2002::/16: the relay's IPv4 in bits 16..48.
        [0x2002, a, b, ..] => Some((Ipv4Addr::new((a >> 8) as u8, a as u8, (b >> 8) as u8, b as u8), None)),
        // Teredo 2001::/32: the server's IPv4 in bits 32..64, the client's
        // in the last 32 bits, inverted.
        [0x2001, 0, a, b, ..] => {
            let server = Ipv4Addr::new((a >> 8) as u8, a as u8, (b >> 8) as u8, b as u8);
            Some((Ipv4Addr::from(!u32::from(low)), Some(server)))
        }
        _ => None,
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
    if let Some((carried, also)) = embedded_v4(ip) {
        let class = classify_v4(carried);
        return also.map_or(class, |v4| stricter(class, classify_v4(v4)));
    }
    let [first, second, third, ..] = ip.segments();
    if ip.is_loopback() {
        Class::Loopback
    } else if ip.is_unspecified()
        || ip.is_multicast()
        // unique local fc00::/7, link-local fe80::/10, site-local fec0::/10
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || (first & 0xffc0) == 0xfec0
        // documentation 2001:db8::/32 and 3fff::/20
        || (first == 0x2001 && second == 0x0db8)
        || (first & 0xfff0) == 0x3ff0
        // NAT64 local-use 64:ff9b:1::/48: where it carries the IPv4 address
        // is the deployment's choice, so it is never called
        || (first == 0x64 && second == 0xff9b && third == 1)
        // discard-only 100::/64, benchmarking 2001:2::/48
        || (first == 0x100 && second == 0 && third == 0 && ip.segments()[3] == 0)
        || (first == 0x2001 && second == 2 && third == 0)
    {
        Class::Internal
    } else {
        Class::Public
    }
}

/// The address policy of one coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    pub(crate) allow_loopback: bool,
    pub(crate) allow_private: bool,
}

impl Policy {
    pub(crate) fn from_options(o: &super::Options) -> Policy {
        Policy { allow_loopback: o.allow_loopback_targets, allow_private: o.allow_private_targets }
    }

    pub(crate) fn allows(self, ip: IpAddr) -> bool {
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
pub(crate) fn parse(url: &str) -> Result<reqwest::Url, Error> {
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
pub(crate) async fn check(url: &str, policy: Policy) -> Result<reqwest::Url, Error> {
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
pub(crate) fn literal_allowed(url: &reqwest::Url, policy: Policy) -> bool {
    literal(url).is_none_or(|ip| policy.allows(ip))
}

/// The delivery client's resolver: system lookups with refused addresses
/// dropped; a name left with none fails to connect.
pub(crate) struct GuardedResolver {
    pub(crate) policy: Policy,
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

    /// Every spelling of an address that reaches an IPv4 host through a
    /// transition scheme is judged as that host, when the endpoint is
    /// created and when a delivery connects.
    #[tokio::test]
    async fn ipv6_carrying_ipv4_is_judged_by_the_ipv4_it_carries() {
        use Class::{Internal as I, Loopback as L, Public as P};
        let table: &[(&str, Class)] = &[
            // IPv4-compatible ::/96
            ("::7f00:1", L),
            ("::127.0.0.1", L),
            ("::a00:1", I),
            ("::10.0.0.1", I),
            ("::a9fe:a9fe", I),
            ("::808:808", P),
            ("::2", I),
            // IPv4-mapped ::ffff:0:0/96
            ("::ffff:127.0.0.1", L),
            ("::ffff:7f00:1", L),
            ("::ffff:169.254.169.254", I),
            ("::ffff:192.168.0.1", I),
            ("::ffff:8.8.8.8", P),
            // IPv4-translated ::ffff:0:0:0/96
            ("::ffff:0:7f00:1", L),
            ("::ffff:0:127.0.0.1", L),
            ("::ffff:0:a9fe:a9fe", I),
            ("::ffff:0:ac10:1", I),
            ("::ffff:0:808:808", P),
            // NAT64 well-known 64:ff9b::/96
            ("64:ff9b::7f00:1", L),
            ("64:ff9b::127.0.0.1", L),
            ("64:ff9b::a9fe:a9fe", I),
            ("64:ff9b::169.254.169.254", I),
            ("64:ff9b::c0a8:101", I),
            ("64:ff9b::6440:1", I),
            ("64:ff9b::808:808", P),
            ("64:ff9b::1.1.1.1", P),
            // NAT64 local-use 64:ff9b:1::/48, whatever follows
            ("64:ff9b:1::808:808", I),
            ("64:ff9b:1:7f00:1::", I),
            // 6to4 2002::/16
            ("2002:7f00:1::", L),
            ("2002:7f00:0001:0:0:0:0:1", L),
            ("2002:a00:1::1", I),
            ("2002:a9fe:a9fe::", I),
            ("2002:c0a8:101::1", I),
            ("2002:808:808::1", P),
            // Teredo 2001::/32: server 8.8.8.8 or 10.0.0.1, client inverted in the last 32 bits
            ("2001:0:808:808::80ff:fffe", L),
            ("2001:0:808:808::f5ff:fffe", I),
            ("2001:0:a00:1::f7f7:f7f7", I),
            ("2001:0:808:808::f7f7:f7f7", P),
            // Other special IPv6 ranges
            ("100::1", I),
            ("2001:2::1", I),
            ("3fff::1", I),
            ("2001:db8::1", I),
            ("fe80::7f00:1", I),
            ("fc00::7f00:1", I),
            ("::", I),
            ("::1", L),
            // Public IPv6 that only looks like it carries something
            ("2606:4700::7f00:1", P),
            ("2001:4860:4860::8888", P),
            ("2003:7f00:1::", P),
        ];
        assert!(table.len() >= 40);
        let strict = Policy { allow_loopback: false, allow_private: false };
        for (spelling, class) in table {
            assert_eq!(classify(ip(spelling)), *class, "{spelling}");
            let url = format!("http://[{spelling}]:8080/hook");
            // At creation: the endpoint is refused unless the address is public.
            let created = check(&url, strict).await;
            assert_eq!(created.is_ok(), *class == Class::Public, "{spelling} at creation: {created:?}");
            // At connection time: a stored URL is re-judged before each delivery.
            let parsed = parse(&url).expect("a well-formed URL");
            assert_eq!(literal_allowed(&parsed, strict), *class == Class::Public, "{spelling} at connection");
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

//! Which releases may run together (docs/upgrading.md). A coordinator admits
//! gateways of its own compatibility line and the one before, and worker SDKs
//! of its own line and the two before; nothing newer than itself. A line is
//! the minor version while Baton is 0.x (0.3.0 and 0.3.7 are line 0.3) and
//! the major version from 1.0 on. [`admit`] is that rule, in one place: the
//! coordinator asks it about every registration and every gateway call, and
//! nothing else decides compatibility.
//!
//! Versions travel as text: a worker in `Register.sdk_version`, a gateway in
//! the [`HEADER`] metadata of every call. A peer that sends none was built
//! before versions were sent, which is 0.1 ([`UNSTATED`]).

use std::fmt;

/// The gRPC metadata key a gateway states its version in.
pub const HEADER: &str = "baton-version";

/// What a peer that states no version is taken to be: every release before
/// versions were sent was 0.1.
pub const UNSTATED: Version = Version { major: 0, minor: 1, patch: 0 };

/// Debug builds only: a process of a test plays this release instead of its
/// own (`own`). Release builds never read it.
pub const TEST_OVERRIDE: &str = "BATON_TEST_VERSION";

/// `MAJOR.MINOR.PATCH`; a pre-release or build suffix (`-rc.1`, `+abc`) is
/// read and ignored, so a release candidate counts as its release.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    pub fn parse(text: &str) -> Option<Version> {
        let core = text.split(['-', '+']).next()?;
        let mut parts = core.split('.');
        let mut number = || -> Option<u32> {
            let part = parts.next()?;
            // Digits only: `+1`, ` 1` and `01` are not how Cargo spells a version.
            let canonical = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
            if !canonical || (part.len() > 1 && part.starts_with('0')) {
                return None;
            }
            part.parse().ok()
        };
        let version = Version { major: number()?, minor: number()?, patch: number()? };
        parts.next().is_none().then_some(version)
    }

    /// The compatibility line this version belongs to.
    pub fn line(self) -> Line {
        if self.major == 0 { Line { major: 0, minor: self.minor } } else { Line { major: self.major, minor: 0 } }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// A compatibility line: `0.3` while 0.x, `2` from 1.0 on. Lines are ordered
/// as their releases are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Line {
    major: u32,
    /// Always 0 from 1.0 on, where the major alone is the line.
    minor: u32,
}

impl Line {
    /// The line `n` lines before this one. From 1.0 on it never reaches back
    /// into 0.x: 1.0 starts afresh (docs/upgrading.md).
    fn back(self, n: u32) -> Line {
        if self.major == 0 {
            Line { major: 0, minor: self.minor.saturating_sub(n) }
        } else {
            Line { major: self.major.saturating_sub(n).max(1), minor: 0 }
        }
    }

    /// The first release of the line.
    fn first(self) -> Version {
        Version { major: self.major, minor: self.minor, patch: 0 }
    }
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.major == 0 { write!(f, "0.{}", self.minor) } else { write!(f, "{}", self.major) }
    }
}

/// Who connects to a coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Gateway,
    Worker,
}

impl Role {
    /// How many lines older than the coordinator this role may be.
    pub const fn lines_behind(self) -> u32 {
        match self {
            // Gateways are the operator's to upgrade, right after the coordinators.
            Role::Gateway => 1,
            // Worker SDKs are the tool authors', on their own schedules.
            Role::Worker => 2,
        }
    }

    /// The metric label.
    pub const fn name(self) -> &'static str {
        match self {
            Role::Gateway => "gateway",
            Role::Worker => "worker",
        }
    }

    /// How a message names a peer of this role.
    const fn what(self) -> &'static str {
        match self {
            Role::Gateway => "gateway",
            Role::Worker => "worker SDK",
        }
    }

    /// What the peer's owner upgrades.
    const fn upgrade(self) -> &'static str {
        match self {
            Role::Gateway => "upgrade the gateway",
            Role::Worker => "upgrade baton-worker",
        }
    }
}

/// Why a coordinator refuses a peer. The text names both versions and the
/// way out; it is what the peer's operator reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    TooOld { role: Role, peer: Version, coordinator: Version, oldest: Line },
    TooNew { role: Role, peer: Version, coordinator: Version },
    Unreadable { role: Role, coordinator: Version },
}

impl Refusal {
    pub fn role(&self) -> Role {
        match self {
            Refusal::TooOld { role, .. } | Refusal::TooNew { role, .. } | Refusal::Unreadable { role, .. } => *role,
        }
    }

    /// The refused version as a metric label, from a bounded set whatever a
    /// caller sends: an older line (bounded by the coordinator's own), or
    /// `newer`, or `unreadable`. Under a 1.0-or-later coordinator every 0.x
    /// line is `0.x`.
    pub fn label(&self) -> String {
        match self {
            Refusal::TooOld { peer, coordinator, .. } if peer.major == 0 && coordinator.major > 0 => "0.x".to_owned(),
            Refusal::TooOld { peer, .. } => peer.line().to_string(),
            Refusal::TooNew { .. } => "newer".to_owned(),
            Refusal::Unreadable { .. } => "unreadable".to_owned(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::TooOld { role, peer, coordinator, oldest } => write!(
                f,
                "{} {peer} is older than this coordinator ({coordinator}) supports ({} and later): {} to {oldest} or later",
                role.what(),
                oldest.first(),
                role.upgrade(),
            ),
            Refusal::TooNew { role: Role::Gateway, peer, coordinator } => write!(
                f,
                "gateway {peer} is newer than this coordinator ({coordinator}): upgrade the coordinators to {} before the gateways",
                peer.line()
            ),
            Refusal::TooNew { role: Role::Worker, peer, coordinator } => write!(
                f,
                "worker SDK {peer} is newer than this coordinator ({coordinator}): upgrade the coordinators to {}, or build the worker with baton-worker {}",
                peer.line(),
                coordinator.line()
            ),
            Refusal::Unreadable { role, coordinator } => write!(
                f,
                "the {} sent a version that is not MAJOR.MINOR.PATCH; this coordinator is {coordinator}",
                role.what()
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// The rule: may a `role` peer stating `stated` (its text as sent; empty or
/// absent is [`UNSTATED`]) work with a coordinator of version `coordinator`?
/// Accepted, the peer's version.
pub fn admit(role: Role, coordinator: Version, stated: Option<&str>) -> Result<Version, Refusal> {
    let peer = match stated.map(str::trim) {
        None | Some("") => UNSTATED,
        Some(text) => Version::parse(text).ok_or(Refusal::Unreadable { role, coordinator })?,
    };
    let (line, own) = (peer.line(), coordinator.line());
    if line > own {
        return Err(Refusal::TooNew { role, peer, coordinator });
    }
    let oldest = own.back(role.lines_behind());
    if line < oldest {
        return Err(Refusal::TooOld { role, peer, coordinator, oldest });
    }
    Ok(peer)
}

/// This process's version: `built` (the crate's `CARGO_PKG_VERSION`, passed
/// by each role so a tool author's worker reports its SDK's version). A debug
/// build reads [`TEST_OVERRIDE`] instead when it is set, so that a black-box
/// test can run one process as another release; a release build never does.
pub fn own(built: &str) -> Version {
    #[cfg(debug_assertions)]
    if let Some(played) = std::env::var(TEST_OVERRIDE).ok().as_deref().and_then(Version::parse) {
        return played;
    }
    Version::parse(built).unwrap_or(UNSTATED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap_or_else(|| panic!("{text} parses"))
    }

    fn admits(role: Role, coordinator: &str, peer: &str) -> bool {
        admit(role, v(coordinator), Some(peer)).is_ok()
    }

    #[test]
    fn versions_are_three_numbers_with_an_ignored_suffix() {
        assert_eq!(v("0.3.7"), Version { major: 0, minor: 3, patch: 7 });
        assert_eq!(v("1.0.0-rc.1"), v("1.0.0"));
        assert_eq!(v("0.2.1+build.5"), v("0.2.1"));
        for bad in ["", "1", "1.2", "1.2.3.4", "v1.2.3", "1.2.x", "1..3", " 1.2.3", "01.2.3", "1.2.-3", "+1.2.3"] {
            assert_eq!(Version::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Version::parse("4294967296.0.0"), None, "beyond u32");
        assert_eq!(Version::parse(env!("CARGO_PKG_VERSION")).map(|_| ()), Some(()), "this release parses");
    }

    #[test]
    fn a_line_is_the_minor_while_0x_and_the_major_after() {
        assert_eq!(v("0.3.0").line(), v("0.3.9").line());
        assert_ne!(v("0.3.0").line(), v("0.4.0").line());
        assert_eq!(v("2.0.0").line(), v("2.7.1").line());
        assert!(v("0.9.0").line() < v("1.0.0").line());
        assert_eq!((v("0.3.2").line().to_string(), v("2.5.0").line().to_string()), ("0.3".into(), "2".into()));
    }

    #[test]
    fn gateways_one_line_back_workers_two_nothing_newer() {
        // Gateways: N-1..N.
        assert!(admits(Role::Gateway, "0.3.0", "0.3.9"));
        assert!(admits(Role::Gateway, "0.3.0", "0.2.0"));
        assert!(!admits(Role::Gateway, "0.3.0", "0.1.99"));
        assert!(!admits(Role::Gateway, "0.3.0", "0.4.0"));
        // Worker SDKs: N-2..N.
        assert!(admits(Role::Worker, "0.3.5", "0.1.0"));
        assert!(admits(Role::Worker, "0.3.0", "0.3.1"), "a later patch of the same line");
        assert!(!admits(Role::Worker, "0.3.0", "0.0.9"));
        assert!(!admits(Role::Worker, "0.3.0", "0.4.0"));
        // From 1.0 the line is the major, and 0.x never comes back.
        assert!(admits(Role::Worker, "3.0.0", "1.9.0"));
        assert!(!admits(Role::Worker, "3.0.0", "0.9.0"));
        assert!(!admits(Role::Gateway, "3.1.0", "1.9.9"));
        assert!(admits(Role::Gateway, "3.1.0", "2.0.0"));
        assert!(!admits(Role::Worker, "1.0.0", "0.9.0"), "1.0 starts afresh");
        assert!(admits(Role::Worker, "1.4.0", "1.0.0"));
    }

    #[test]
    fn the_window_saturates_at_the_first_line() {
        assert!(admits(Role::Worker, "0.1.0", "0.0.1"));
        assert!(admits(Role::Gateway, "0.0.5", "0.0.0"));
        assert!(admits(Role::Gateway, "0.1.0", "0.0.0"));
    }

    #[test]
    fn an_unstated_version_is_the_oldest_release_and_may_be_too_old() {
        assert_eq!(admit(Role::Worker, v("0.1.0"), None), Ok(UNSTATED));
        assert_eq!(admit(Role::Worker, v("0.3.0"), Some("")), Ok(UNSTATED));
        assert!(matches!(admit(Role::Gateway, v("0.3.0"), None), Err(Refusal::TooOld { .. })));
    }

    #[test]
    fn refusals_name_both_versions_and_the_way_out() {
        let old = admit(Role::Worker, v("0.3.0"), Some("0.0.9")).map_err(|e| e.to_string());
        assert_eq!(
            old,
            Err("worker SDK 0.0.9 is older than this coordinator (0.3.0) supports (0.1.0 and later): upgrade baton-worker to 0.1 or later".into())
        );
        let gateway = admit(Role::Gateway, v("0.3.0"), Some("0.1.0")).map_err(|e| e.to_string());
        assert_eq!(
            gateway,
            Err("gateway 0.1.0 is older than this coordinator (0.3.0) supports (0.2.0 and later): upgrade the gateway to 0.2 or later".into())
        );
        let new = admit(Role::Worker, v("0.3.0"), Some("0.4.1")).map_err(|e| e.to_string());
        assert_eq!(
            new,
            Err("worker SDK 0.4.1 is newer than this coordinator (0.3.0): upgrade the coordinators to 0.4, or build the worker with baton-worker 0.3".into())
        );
        let unreadable = admit(Role::Worker, v("0.3.0"), Some("latest")).map_err(|e| e.to_string());
        assert_eq!(
            unreadable,
            Err("the worker SDK sent a version that is not MAJOR.MINOR.PATCH; this coordinator is 0.3.0".into())
        );
    }

    #[test]
    fn refusal_labels_are_bounded_whatever_is_sent() {
        let label = |coordinator: &str, peer: &str| {
            admit(Role::Worker, v(coordinator), Some(peer)).err().map(|r| r.label()).unwrap_or_default()
        };
        assert_eq!(label("0.5.0", "0.1.3"), "0.1");
        assert_eq!(label("0.5.0", "0.6.0"), "newer");
        assert_eq!(label("0.5.0", "99999.0.0"), "newer");
        assert_eq!(label("0.5.0", "junk"), "unreadable");
        assert_eq!(label("3.0.0", "0.12345.0"), "0.x");
        assert_eq!(label("3.0.0", "0.7.0"), "0.x");
    }

    #[test]
    fn a_release_build_reports_what_it_was_built_as() {
        // The override is a debug-build affair; unset, the built version stands.
        if std::env::var_os(TEST_OVERRIDE).is_none() {
            assert_eq!(own("0.7.2"), v("0.7.2"));
            assert_eq!(own("not a version"), UNSTATED);
        }
    }
}

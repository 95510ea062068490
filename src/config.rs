//! The configuration file: one typed YAML document (`--config`), then `BATON_…`
//! environment overrides (`BATON_DATABASE__URL=…`: sections joined by `__`,
//! values parsed as YAML scalars), then validation. Unknown fields are errors;
//! every error names the field. Nothing here binds a port.

use serde::Deserialize;
use serde_yaml::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

mod database;
mod redis;
mod sign_in;
mod webhooks;
pub(crate) use database::{Database, Migrations};
pub(crate) use redis::Redis;
pub(crate) use sign_in::SignInSection;
pub(crate) use webhooks::WebhooksSection;

#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("invalid configuration: {0}")]
    Parse(String),
    #[error("invalid configuration: {field} {problem}")]
    Field { field: &'static str, problem: String },
}

/// Above this a session's outbox could not hold one message per assignment.
const MAX_SESSION_CAPACITY: u32 = 4096;

/// A deserializer's message without the values it quotes: a key or token put
/// in the wrong place must not reach a pod's log. Field names (in backticks)
/// and positions stay, so the message still says where the problem is.
fn redact_values(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut chars = message.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            out.push(c);
            continue;
        }
        out.push_str("\"<redacted>\"");
        let mut escaped = false;
        for c in chars.by_ref() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => break,
                _ => escaped = false,
            }
        }
    }
    out
}

fn field(field: &'static str, problem: impl Into<String>) -> Error {
    Error::Field { field, problem: problem.into() }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Features {
    pub native_mcp_tasks: bool,
    pub mcp_tasks_compatibility: bool,
    pub mcp_tasks_principal_concurrency: Option<i64>,
    pub mcp_tasks_project_concurrency: Option<i64>,
    pub mcp_tasks_organization_concurrency: Option<i64>,
    pub mcp_tasks_backlog: Option<i64>,
    pub mcp_tasks_retained_payload_bytes: Option<i64>,
    /// Prefix of the compatibility tools (`Baton_GetToolExecution`, …).
    pub mcp_tasks_compatibility_prefix: Option<String>,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PayloadKey {
    pub id: String,
    pub key: String,
}

impl std::fmt::Debug for PayloadKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PayloadKey({}, <redacted>)", self.id)
    }
}

#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Security {
    pub execution_payload_keys: Vec<PayloadKey>,
    /// Base64 32-byte key sealing legacy MCP session ids; the same on every gateway.
    pub mcp_session_key: Option<String>,
    /// The cluster credential coordinators present to each other's `Peer`
    /// service: the same on every coordinator, at least 32 characters.
    pub cluster_secret: Option<String>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |v: &Option<String>| if v.is_some() { "<redacted>" } else { "<unset>" };
        f.debug_struct("Security")
            .field("execution_payload_keys", &self.execution_payload_keys)
            .field("mcp_session_key", &shown(&self.mcp_session_key))
            .field("cluster_secret", &shown(&self.cluster_secret))
            .finish()
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct CoordinatorSection {
    pub listen: SocketAddr,
    /// How other replicas reach this one; defaults to `http://{listen}`.
    pub advertise_url: Option<String>,
    /// The most concurrent assignments one worker session may declare; larger
    /// declared capacities are clamped to it.
    pub max_worker_capacity: u32,
    /// The largest tool description a worker may register; larger is refused.
    pub max_tool_description_bytes: usize,
    /// The largest tool input schema a worker may register; larger is refused.
    pub max_tool_schema_bytes: usize,
    /// A dashboard session unused this long ends.
    pub dashboard_idle_ms: i64,
    /// A dashboard session ends this long after sign-in, however busy.
    pub dashboard_lifetime_ms: i64,
}

impl Default for CoordinatorSection {
    fn default() -> Self {
        CoordinatorSection {
            listen: SocketAddr::from(([127, 0, 0, 1], 7070)),
            advertise_url: None,
            max_worker_capacity: 512,
            max_tool_description_bytes: 16 << 10,
            max_tool_schema_bytes: 64 << 10,
            dashboard_idle_ms: 30 * 60_000,
            dashboard_lifetime_ms: 8 * 3_600_000,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct GatewaySection {
    pub listen: SocketAddr,
    pub coordinator_url: String,
    pub max_body_bytes: usize,
    pub foreground_budget_ms: u64,
    pub allowed_hosts: Vec<String>,
    /// A connection must deliver a request head (and each chunk of a body)
    /// within this long; one with no request in flight for this long is closed.
    pub header_read_timeout_ms: u64,
    /// How long a kept-alive connection may sit between requests before it is closed.
    pub idle_timeout_ms: u64,
    /// On shutdown, how long in-flight requests may finish before the
    /// remaining connections are dropped (parked waits answer at once).
    pub drain_timeout_ms: u64,
    /// Waits (long polls, blocking streams, foreground tool calls) one
    /// credential may hold on one gateway at once; 429 above it.
    pub max_waits_per_principal: usize,
    /// Waits one gateway process holds at once, all callers together.
    pub max_waits: usize,
    /// The longest long poll (`wait_ms`) for any change a caller may ask for;
    /// longer is 400. At most 300000 (five minutes).
    pub max_wait_ms: u64,
    /// The longest long poll for a state (`wait_ms` with `until`); longer is
    /// 400. At most 14400000 (four hours).
    pub max_predicate_wait_ms: u64,
    /// The longest websocket watch (`timeout_seconds`); longer is 400.
    pub max_watch_seconds: u64,
    /// How long a watch's single-use `websocket_url` may be opened.
    pub watch_connect_ttl_ms: u64,
}

impl Default for GatewaySection {
    fn default() -> Self {
        GatewaySection {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            coordinator_url: "http://127.0.0.1:7070".into(),
            max_body_bytes: 1 << 20,
            foreground_budget_ms: 10_000,
            allowed_hosts: Vec::new(),
            header_read_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
            drain_timeout_ms: 10_000,
            max_waits_per_principal: 100,
            max_waits: 10_000,
            max_wait_ms: 45_000,
            max_predicate_wait_ms: 45_000,
            max_watch_seconds: 14_400,
            watch_connect_ttl_ms: 30_000,
        }
    }
}

/// The `worker` section is the worker crate's: a tool author's own binary
/// (`baton_worker::serve`) reads it from the same file.
pub(crate) use baton_worker::serve::WorkerSection;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Executions {
    pub max_ttl_ms: i64,
    pub retention_ms: i64,
    pub lease_ms: i64,
    pub owner_loss_grace_ms: i64,
    pub poll_interval_ms: i64,
    pub sweep_interval_ms: u64,
    pub max_input_bytes: usize,
    /// How often cluster admission (Redis) is re-derived from Postgres.
    pub admission_rebuild_ms: u64,
}

impl Default for Executions {
    fn default() -> Self {
        Executions {
            max_ttl_ms: 24 * 3_600_000,
            retention_ms: 7 * 24 * 3_600_000,
            lease_ms: 10_000,
            owner_loss_grace_ms: 10_000,
            poll_interval_ms: 1_000,
            sweep_interval_ms: 1_000,
            max_input_bytes: 1 << 20,
            admission_rebuild_ms: 30_000,
        }
    }
}

/// TLS on the gRPC hops (gateway → coordinator, worker → coordinator,
/// coordinator → coordinator), all off by default. Files are PEM, read and
/// checked at start. The scheme of a coordinator URL decides whether a client
/// uses TLS (`https://`); see `crate::tls` for how each role uses the fields.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Tls {
    /// The CA bundle that verifies coordinators' certificates (gateways,
    /// workers, and coordinators calling peers). Unset: the system trust store.
    pub ca_file: Option<PathBuf>,
    /// This process's certificate chain: a coordinator serves TLS with it (and
    /// presents it to peers); a gateway or worker presents it as its client
    /// certificate. Needs `key_file`.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Coordinator: verify client certificates against this CA bundle (mTLS).
    pub client_ca_file: Option<PathBuf>,
    /// Coordinator with `client_ca_file`: refuse clients without a valid
    /// certificate (the default); `false` admits them (while rolling mTLS out).
    pub require_client_cert: Option<bool>,
    /// The name checked on a coordinator's certificate instead of the URL's
    /// host (e.g. the Service name when peers dial pod IPs).
    pub server_name: Option<String>,
}

/// Span export (OTLP/gRPC, endpoint from `OTEL_EXPORTER_OTLP_ENDPOINT`); for an
/// `https://` endpoint.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Telemetry {
    /// Serve Prometheus `/metrics` here (its own listener, apart from the API).
    pub metrics_addr: Option<SocketAddr>,
    /// The CA bundle that verifies the collector. Unset: the system trust store.
    pub otlp_ca_file: Option<PathBuf>,
    /// A client certificate for collectors that require one. Needs `otlp_key_file`.
    pub otlp_cert_file: Option<PathBuf>,
    pub otlp_key_file: Option<PathBuf>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Config {
    pub features: Features,
    pub security: Security,
    pub database: Database,
    pub redis: Redis,
    pub coordinator: CoordinatorSection,
    pub gateway: GatewaySection,
    pub worker: WorkerSection,
    pub executions: Executions,
    pub tls: Tls,
    pub telemetry: Telemetry,
    pub webhooks: WebhooksSection,
    pub dashboard_sign_in: SignInSection,
}

impl Config {
    /// Reads the file (if any), applies the process environment, validates
    /// (the TLS files are read and checked by `crate::tls::validate`).
    pub(crate) fn load(path: Option<&Path>) -> Result<Config, Error> {
        let vars = std::env::vars().filter(|(k, _)| k.starts_with("BATON_") && k.contains("__"));
        Self::load_with(path, vars)
    }

    pub(crate) fn load_with(
        path: Option<&Path>,
        vars: impl Iterator<Item = (String, String)>,
    ) -> Result<Config, Error> {
        let mut tree = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|source| Error::Read { path: p.display().to_string(), source })?;
                serde_yaml::from_str::<Value>(&text).map_err(|e| Error::Parse(redact_values(&e.to_string())))?
            }
            None => Value::Mapping(Default::default()),
        };
        if tree.is_null() {
            tree = Value::Mapping(Default::default());
        }
        baton_worker::serve::apply_env(&mut tree, vars);
        // The path names the field even when the message cannot show the value.
        let config: Config = serde_path_to_error::deserialize(tree).map_err(|e| {
            let path = e.path().to_string();
            let message = redact_values(&e.into_inner().to_string());
            Error::Parse(if path == "." { message } else { format!("{path}: {message}") })
        })?;
        config.validate()?;
        Ok(config)
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        self.redis.validate()?;
        self.dashboard_sign_in.validate()?;
        self.database.validate()?;
        let f = &self.features;
        let surfaces_on = f.native_mcp_tasks || f.mcp_tasks_compatibility;
        let bounds: [(&'static str, Option<i64>); 5] = [
            ("features.mcp_tasks_principal_concurrency", f.mcp_tasks_principal_concurrency),
            ("features.mcp_tasks_project_concurrency", f.mcp_tasks_project_concurrency),
            ("features.mcp_tasks_organization_concurrency", f.mcp_tasks_organization_concurrency),
            ("features.mcp_tasks_backlog", f.mcp_tasks_backlog),
            ("features.mcp_tasks_retained_payload_bytes", f.mcp_tasks_retained_payload_bytes),
        ];
        for (name, value) in bounds {
            match value {
                Some(v) if v <= 0 => return Err(field(name, "must be a positive integer")),
                None if surfaces_on => {
                    return Err(field(name, "is required when an MCP tasks surface is enabled"));
                }
                _ => {}
            }
        }
        let e = &self.executions;
        for (name, v) in [
            ("executions.max_ttl_ms", e.max_ttl_ms),
            ("executions.retention_ms", e.retention_ms),
            ("executions.lease_ms", e.lease_ms),
            ("executions.owner_loss_grace_ms", e.owner_loss_grace_ms),
            ("executions.poll_interval_ms", e.poll_interval_ms),
        ] {
            if v <= 0 {
                return Err(field(name, "must be a positive integer"));
            }
        }
        let g = &self.gateway;
        for (name, positive) in [
            ("gateway.header_read_timeout_ms", g.header_read_timeout_ms > 0),
            ("gateway.idle_timeout_ms", g.idle_timeout_ms > 0),
            ("gateway.max_waits_per_principal", g.max_waits_per_principal > 0),
            ("gateway.max_waits", g.max_waits > 0),
            ("gateway.max_watch_seconds", g.max_watch_seconds > 0),
            // The coordinator remembers a used token for at most an hour.
            ("gateway.watch_connect_ttl_ms", (1..=3_600_000).contains(&g.watch_connect_ttl_ms)),
        ] {
            if !positive {
                return Err(field(name, "must be positive"));
            }
        }
        // Proxies and clients hold a request open for these at most.
        for (name, ms, max) in [
            ("gateway.max_wait_ms", g.max_wait_ms, 300_000),
            ("gateway.max_predicate_wait_ms", g.max_predicate_wait_ms, 14_400_000),
        ] {
            if !(1..=max).contains(&ms) {
                return Err(field(name, format!("must be 1 to {max}")));
            }
        }
        if self.worker.capacity == 0 {
            return Err(field("worker.capacity", "must be positive"));
        }
        if !(1..=MAX_SESSION_CAPACITY).contains(&self.coordinator.max_worker_capacity) {
            return Err(field("coordinator.max_worker_capacity", format!("must be 1 to {MAX_SESSION_CAPACITY}")));
        }
        // A limit above what one gRPC message carries (4 MiB) could never be met.
        for (name, bytes) in [
            ("coordinator.max_tool_description_bytes", self.coordinator.max_tool_description_bytes),
            ("coordinator.max_tool_schema_bytes", self.coordinator.max_tool_schema_bytes),
        ] {
            if !(1..=4 << 20).contains(&bytes) {
                return Err(field(name, "must be 1 to 4194304"));
            }
        }
        // A minute at least (a session is touched at most once a minute); a week at most.
        let c = &self.coordinator;
        for (name, ms) in [
            ("coordinator.dashboard_idle_ms", c.dashboard_idle_ms),
            ("coordinator.dashboard_lifetime_ms", c.dashboard_lifetime_ms),
        ] {
            if !(60_000..=7 * 86_400_000).contains(&ms) {
                return Err(field(name, "must be 60000 (a minute) to 604800000 (a week)"));
            }
        }
        if self.security.cluster_secret.as_ref().is_some_and(|s| s.trim().len() < 32) {
            return Err(field("security.cluster_secret", "must be at least 32 characters"));
        }
        if let Some(prefix) = &f.mcp_tasks_compatibility_prefix
            && (prefix.is_empty() || !prefix.chars().all(|c| c.is_ascii_alphanumeric()))
        {
            return Err(field("features.mcp_tasks_compatibility_prefix", "must be ASCII letters and digits"));
        }
        self.webhooks.validate()?;
        Ok(())
    }

    pub(crate) fn key_ring(&self) -> Result<baton_coordinator::crypto::KeyRing, Error> {
        let keys = &self.security.execution_payload_keys;
        if keys.is_empty() {
            return Err(field("security.execution_payload_keys", "must list at least one key"));
        }
        baton_coordinator::crypto::KeyRing::from_base64(keys.iter().map(|k| (k.id.as_str(), k.key.as_str())))
            .map_err(|e| field("security.execution_payload_keys", e.to_string()))
    }

    pub(crate) fn database_url(&self) -> Result<String, Error> {
        self.database.url.clone().ok_or_else(|| field("database.url", "is required"))
    }

    pub(crate) fn bounds(&self) -> baton_coordinator::admission::Bounds {
        let f = &self.features;
        let pick = |v: Option<i64>, default: u64| v.map_or(default, |v| v.max(1) as u64);
        baton_coordinator::admission::Bounds {
            principal_concurrency: pick(f.mcp_tasks_principal_concurrency, 1_000),
            project_concurrency: pick(f.mcp_tasks_project_concurrency, 10_000),
            organization_concurrency: pick(f.mcp_tasks_organization_concurrency, 100_000),
            backlog: pick(f.mcp_tasks_backlog, 100_000),
            retained_payload_bytes: pick(f.mcp_tasks_retained_payload_bytes, 1 << 30),
        }
    }

    pub(crate) fn compat_prefix(&self) -> String {
        self.features.mcp_tasks_compatibility_prefix.clone().unwrap_or_else(|| "Baton".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn load(yaml: &str, env: &[(&str, &str)]) -> Result<Config, Error> {
        let dir = std::env::temp_dir().join(format!("baton-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join(format!("{}.yaml", yaml.len() + env.len()));
        std::fs::write(&path, yaml).expect("write");
        Config::load_with(Some(&path), env.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    const ON: &str = "features:\n  native_mcp_tasks: true\n  mcp_tasks_principal_concurrency: 20\n  mcp_tasks_project_concurrency: 40\n  mcp_tasks_organization_concurrency: 80\n  mcp_tasks_backlog: 100\n  mcp_tasks_retained_payload_bytes: 1048576\n";

    #[test]
    fn seed_block_is_accepted_verbatim() {
        let c = load(ON, &[]).expect("valid");
        assert!(c.features.native_mcp_tasks);
        assert_eq!(c.bounds().backlog, 100);
    }

    #[test]
    fn a_non_positive_or_missing_bound_names_the_field() {
        let err = load(&ON.replace("backlog: 100", "backlog: 0"), &[]).expect_err("zero");
        assert!(err.to_string().contains("mcp_tasks_backlog"), "{err}");
        let err = load(&ON.replace("  mcp_tasks_organization_concurrency: 80\n", ""), &[]).expect_err("missing");
        assert!(err.to_string().contains("mcp_tasks_organization_concurrency"), "{err}");
    }

    #[test]
    fn surfaces_are_off_by_default_and_bounds_optional_then() {
        let c = load("", &[]).expect("empty is valid");
        assert!(!c.features.native_mcp_tasks && !c.features.mcp_tasks_compatibility);
    }

    #[test]
    fn unknown_fields_are_errors_that_name_them() {
        let err = load("features:\n  native_tasks: true\n", &[]).expect_err("unknown");
        assert!(err.to_string().contains("native_tasks"), "{err}");
    }

    #[test]
    fn environment_overrides_the_file() {
        let c = load(ON, &[("BATON_FEATURES__MCP_TASKS_BACKLOG", "7"), ("BATON_DATABASE__URL", "sqlite://x.db")])
            .expect("valid");
        assert_eq!(c.features.mcp_tasks_backlog, Some(7));
        assert_eq!(c.database.url.as_deref(), Some("sqlite://x.db"));
        let err = load(ON, &[("BATON_FEATURES__MCP_TASKS_BACKLOG", "-1")]).expect_err("negative");
        assert!(err.to_string().contains("mcp_tasks_backlog"));
    }

    #[test]
    fn gateway_shedding_has_generous_defaults_and_positive_bounds() {
        let c = load("", &[]).expect("valid");
        let g = &c.gateway;
        assert_eq!((g.header_read_timeout_ms, g.drain_timeout_ms), (10_000, 10_000));
        assert_eq!((g.max_waits_per_principal, g.max_waits), (100, 10_000));
        let c = load("", &[("BATON_GATEWAY__HEADER_READ_TIMEOUT_MS", "500"), ("BATON_GATEWAY__MAX_WAITS", "7")])
            .expect("valid");
        assert_eq!((c.gateway.header_read_timeout_ms, c.gateway.max_waits), (500, 7));
        let err = load("", &[("BATON_GATEWAY__MAX_WAITS_PER_PRINCIPAL", "0")]).expect_err("zero");
        assert!(err.to_string().contains("gateway.max_waits_per_principal"), "{err}");
    }

    #[test]
    fn wait_lengths_are_configured_and_checked() {
        let g = load("", &[]).expect("valid").gateway;
        assert_eq!((g.max_wait_ms, g.max_watch_seconds, g.watch_connect_ttl_ms), (45_000, 14_400, 30_000));
        assert_eq!(g.max_predicate_wait_ms, 45_000);
        let long = [("BATON_GATEWAY__MAX_WAIT_MS", "300000"), ("BATON_GATEWAY__MAX_PREDICATE_WAIT_MS", "14400000")];
        let g = load("", &long).expect("the seed's ceilings are reachable").gateway;
        assert_eq!((g.max_wait_ms, g.max_predicate_wait_ms), (300_000, 14_400_000));
        for (name, value) in [
            ("BATON_GATEWAY__MAX_WAIT_MS", "0"),
            ("BATON_GATEWAY__MAX_WAIT_MS", "300001"),
            ("BATON_GATEWAY__MAX_PREDICATE_WAIT_MS", "14400001"),
            ("BATON_GATEWAY__MAX_WATCH_SECONDS", "0"),
            ("BATON_GATEWAY__WATCH_CONNECT_TTL_MS", "3600001"),
        ] {
            let err = load("", &[(name, value)]).expect_err("refused");
            let field = name.trim_start_matches("BATON_GATEWAY__").to_ascii_lowercase();
            assert!(err.to_string().contains(&format!("gateway.{field}")), "{err}");
        }
    }

    #[test]
    fn dashboard_session_lifetimes_are_configured_and_checked() {
        let c = load("", &[]).expect("valid").coordinator;
        assert_eq!((c.dashboard_idle_ms, c.dashboard_lifetime_ms), (1_800_000, 28_800_000));
        for (name, value) in [("IDLE_MS", "59999"), ("LIFETIME_MS", "604800001")] {
            let err = load("", &[(&format!("BATON_COORDINATOR__DASHBOARD_{name}"), value)]).expect_err("refused");
            assert!(err.to_string().contains(&format!("coordinator.dashboard_{}", name.to_lowercase())), "{err}");
        }
    }

    #[test]
    fn tls_is_off_by_default_and_its_fields_are_named() {
        let c = load("", &[]).expect("valid");
        assert!(c.tls.cert_file.is_none() && c.tls.ca_file.is_none() && c.telemetry.otlp_ca_file.is_none());
        let err = load("tls:\n  ca_path: /x\n", &[]).expect_err("unknown");
        assert!(err.to_string().contains("ca_path"), "{err}");
    }

    #[test]
    fn values_in_the_wrong_place_are_never_echoed() {
        let canary = "canary-secret-0123456789";
        for (k, v) in [("BATON_SECURITY__EXECUTION_PAYLOAD_KEYS", canary), ("BATON_WORKER__REMOTE_SERVERS", canary)] {
            let err = load(ON, &[(k, v)]).expect_err("wrong type");
            let text = err.to_string();
            assert!(!text.contains(canary), "{text}");
            assert!(
                text.contains(
                    &k.trim_start_matches("BATON_").split("__").last().unwrap_or_default().to_ascii_lowercase()
                ),
                "{text}"
            );
        }
        assert_eq!(
            redact_values(r#"invalid type: string "a\"b", expected x"#),
            r#"invalid type: string "<redacted>", expected x"#
        );
    }

    #[test]
    fn worker_remote_servers_from_the_environment_keep_their_secrets() {
        let servers =
            r#"[{url: "http://127.0.0.1:9/mcp", bearer_token: s3cret, headers: {X-Api-Key: k3y}, tools: [a]}]"#;
        let c = load(ON, &[("BATON_WORKER__REMOTE_SERVERS", servers)]).expect("valid");
        let s = &c.worker.remote_servers[0];
        assert_eq!((s.url.as_str(), s.tools.as_slice()), ("http://127.0.0.1:9/mcp", ["a".to_owned()].as_slice()));
        assert_eq!(s.bearer_token.as_ref().map(|t| t.expose()), Some("s3cret"));
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cret") && !shown.contains("k3y"), "{shown}");
        let err = load(ON, &[("BATON_WORKER__REMOTE_SERVERS", "[{url: x, token: y}]")]).expect_err("unknown field");
        assert!(err.to_string().contains("token"), "{err}");
    }
}

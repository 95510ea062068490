//! The worker's part of Baton's configuration file: the `worker` section and
//! the client half of `tls`, from the same YAML document `baton worker` reads
//! and the same `BATON_WORKER__…` / `BATON_TLS__…` environment overrides.
//! Other sections are the other roles' business and are ignored here (`baton`
//! itself validates the whole file). Errors name the field, never the value:
//! a token in the wrong place must not reach a log.

use crate::remote::RemoteServer;
use serde::Deserialize;
use serde_yaml::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("invalid configuration: {0}")]
    Parse(String),
    #[error("invalid configuration: {field} {problem}")]
    Field { field: &'static str, problem: String },
}

fn field(field: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::Field { field, problem: problem.into() }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerSection {
    pub coordinator_url: String,
    /// Further coordinators the worker tries in turn with `coordinator_url`
    /// when the one it uses cannot be reached.
    pub coordinator_urls: Vec<String>,
    pub token: Option<String>,
    pub id: Option<String>,
    pub capacity: u32,
    /// On shutdown, how long running tools may finish (and their settlements be
    /// acknowledged) before the worker exits; what still runs then is left to
    /// the owner-loss rules, never re-run by this worker nor called a tool error.
    pub drain_timeout_ms: u64,
    /// Serve `/metrics` here.
    pub metrics_listen: Option<SocketAddr>,
    /// Remote MCP servers whose tools this worker serves. Their credentials
    /// are secrets: never logged, redacted in `Debug`.
    pub remote_servers: Vec<RemoteServer>,
}

impl Default for WorkerSection {
    fn default() -> Self {
        WorkerSection {
            coordinator_url: "http://127.0.0.1:7070".into(),
            coordinator_urls: Vec::new(),
            token: None,
            id: None,
            capacity: 64,
            drain_timeout_ms: 30_000,
            metrics_listen: None,
            remote_servers: Vec::new(),
        }
    }
}

/// The fields of the `tls` section a worker uses (see the README's TLS section).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClientTls {
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub server_name: Option<String>,
}

/// What a worker process reads from the configuration.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct WorkerConfig {
    pub worker: WorkerSection,
    pub tls: ClientTls,
}

/// Applies `BATON_A__B=v` as `a.b: v` onto the YAML tree (values parsed as YAML scalars).
pub fn apply_env(root: &mut Value, vars: impl Iterator<Item = (String, String)>) {
    for (name, raw) in vars {
        let Some(path) = name.strip_prefix("BATON_") else { continue };
        let keys: Vec<String> = path.split("__").map(str::to_ascii_lowercase).collect();
        let value: Value = serde_yaml::from_str(&raw).unwrap_or(Value::String(raw.clone()));
        let mut node = &mut *root;
        for (i, key) in keys.iter().enumerate() {
            if !node.is_mapping() {
                *node = Value::Mapping(Default::default());
            }
            let Value::Mapping(map) = node else { break };
            let k = Value::String(key.clone());
            if i == keys.len() - 1 {
                map.insert(k, value.clone());
                break;
            }
            node = map.entry(k).or_insert(Value::Mapping(Default::default()));
        }
    }
}

impl WorkerConfig {
    /// Reads the file (if any) and applies the process's `BATON_WORKER__…` and
    /// `BATON_TLS__…` variables.
    pub fn load(path: Option<&Path>) -> Result<WorkerConfig, ConfigError> {
        let vars = std::env::vars()
            .filter(|(k, _)| (k.starts_with("BATON_WORKER__") || k.starts_with("BATON_TLS__")) && k.contains("__"));
        Self::load_with(path, vars)
    }

    pub fn load_with(
        path: Option<&Path>,
        vars: impl Iterator<Item = (String, String)>,
    ) -> Result<WorkerConfig, ConfigError> {
        let mut tree = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|source| ConfigError::Read { path: p.display().to_string(), source })?;
                serde_yaml::from_str::<Value>(&text)
                    .map_err(|e| ConfigError::Parse(format!("not YAML (at {:?})", e.location().map(|l| l.line()))))?
            }
            None => Value::Mapping(Default::default()),
        };
        if tree.is_null() {
            tree = Value::Mapping(Default::default());
        }
        apply_env(&mut tree, vars);
        let mut mine = serde_yaml::Mapping::new();
        for section in ["worker", "tls"] {
            if let Some(v) = tree.get(section) {
                mine.insert(Value::String(section.into()), v.clone());
            }
        }
        // The path names the field; the message is left out, since it may quote a value.
        let config: WorkerConfig = serde_path_to_error::deserialize(Value::Mapping(mine)).map_err(|e| {
            let problem = match e.inner().to_string() {
                m if m.starts_with("unknown field") => m.split(',').next().unwrap_or_default().to_owned(),
                _ => "has a value of the wrong type".to_owned(),
            };
            ConfigError::Parse(format!("{}: {problem}", e.path()))
        })?;
        config.validate()?;
        Ok(config)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let w = &self.worker;
        if !(w.coordinator_url.starts_with("http://") || w.coordinator_url.starts_with("https://")) {
            return Err(field("worker.coordinator_url", "must be an http:// or https:// URL"));
        }
        if w.token.as_deref().is_none_or(str::is_empty) {
            return Err(field("worker.token", "is required"));
        }
        if w.capacity == 0 || w.capacity > 4096 {
            return Err(field("worker.capacity", "must be between 1 and 4096"));
        }
        for s in &w.remote_servers {
            s.validate().map_err(|problem| field("worker.remote_servers", problem))?;
        }
        Ok(())
    }

    pub fn drain(&self) -> Duration {
        Duration::from_millis(self.worker.drain_timeout_ms)
    }

    /// The runtime's options; `tls` as `client_tls` builds it.
    pub fn options(&self) -> Result<crate::Options, ConfigError> {
        let w = &self.worker;
        Ok(crate::Options {
            coordinator_url: w.coordinator_url.clone(),
            coordinator_urls: w.coordinator_urls.clone(),
            token: w.token.clone().ok_or_else(|| field("worker.token", "is required"))?,
            worker_id: w.id.clone().unwrap_or_else(random_worker_id),
            capacity: w.capacity,
            remote_servers: w.remote_servers.clone(),
            tls: self.client_tls()?,
        })
    }

    /// The TLS client configuration for an `https://` coordinator: the
    /// configured CA (else the system roots), a client certificate for mTLS.
    pub fn client_tls(&self) -> Result<Option<ClientTlsConfig>, ConfigError> {
        let t = &self.tls;
        let read = |name: &'static str, path: &Path| {
            std::fs::read(path).map_err(|e| field(name, format!("cannot be read: {}", e.kind())))
        };
        let identity = match (&t.cert_file, &t.key_file) {
            (Some(cert), Some(key)) => {
                Some(Identity::from_pem(read("tls.cert_file", cert)?, read("tls.key_file", key)?))
            }
            (None, None) => None,
            _ => return Err(field("tls.cert_file", "and tls.key_file go together")),
        };
        if t.ca_file.is_none() && identity.is_none() && t.server_name.is_none() {
            return Ok(None);
        }
        let mut config = match &t.ca_file {
            Some(path) => ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read("tls.ca_file", path)?)),
            None => ClientTlsConfig::new().with_enabled_roots(),
        };
        if let Some(identity) = identity {
            config = config.identity(identity);
        }
        if let Some(name) = &t.server_name {
            config = config.domain_name(name.clone());
        }
        Ok(Some(config.timeout(Duration::from_secs(10))))
    }
}

/// `wk_` and 16 random hex digits (the runtime adds a per-process suffix).
pub fn random_worker_id() -> String {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        bytes = u64::from(std::process::id()).to_le_bytes();
    }
    format!("wk_{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(yaml: &str, env: &[(&str, &str)]) -> Result<WorkerConfig, ConfigError> {
        let dir = std::env::temp_dir().join(format!("baton-worker-config-{}", random_worker_id()));
        std::fs::write(&dir, yaml).map_err(|source| ConfigError::Read { path: String::new(), source })?;
        let vars = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        let loaded = WorkerConfig::load_with(Some(&dir), vars);
        let _ = std::fs::remove_file(&dir);
        loaded
    }

    #[test]
    fn reads_the_worker_section_of_the_cluster_file_and_ignores_the_rest() {
        let yaml = "database: {url: postgres://x}\nworker: {coordinator_url: 'http://c:7070', token: t, capacity: 3}\n";
        let c = load(yaml, &[]).expect("valid");
        assert_eq!(c.worker.coordinator_url, "http://c:7070");
        assert_eq!(c.worker.capacity, 3);
        assert_eq!(c.drain(), Duration::from_secs(30));
    }

    #[test]
    fn the_environment_overrides_the_file() {
        let c = load("worker: {token: a}", &[("BATON_WORKER__TOKEN", "b"), ("BATON_WORKER__DRAIN_TIMEOUT_MS", "5")])
            .expect("valid");
        assert_eq!(c.worker.token.as_deref(), Some("b"));
        assert_eq!(c.drain(), Duration::from_millis(5));
    }

    #[test]
    fn errors_name_the_field_and_never_the_value() {
        let err = load("worker: {}", &[]).expect_err("no token").to_string();
        assert!(err.contains("worker.token"), "{err}");
        let err = load("worker: {token: a, capacity: sekrit-value}", &[]).expect_err("type").to_string();
        assert!(err.contains("worker.capacity") && !err.contains("sekrit"), "{err}");
        let err = load("worker: {token: a, tokn: sekrit-value}", &[]).expect_err("unknown").to_string();
        assert!(err.contains("tokn") && !err.contains("sekrit"), "{err}");
    }
}

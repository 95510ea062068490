//! A cluster of real `baton` processes on loopback for black-box tests: its own
//! Postgres database and Redis key prefix (so tests run in parallel), identity
//! created through `baton admin`, roles started on port 0 and found by the
//! address they log. Every process is killed when the cluster is dropped.

use anyhow::{Context as _, Result, anyhow, bail};
use base64::Engine as _;
use serde_json::{Value, json};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

mod settings;
pub(crate) use settings::Settings;

pub(crate) fn baton_bin() -> PathBuf {
    if let Ok(p) = std::env::var("BATON_BIN") {
        return PathBuf::from(p);
    }
    // target/debug/deps/it-xxxx -> target/debug/baton
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent().and_then(Path::parent).map(|d| d.join("baton")).expect("target dir")
}

pub(crate) fn postgres_url() -> String {
    std::env::var("TEST_POSTGRES_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

pub(crate) fn redis_url() -> String {
    std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into())
}

pub(crate) fn random_suffix() -> String {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).expect("rng");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Polls `f` until it yields `Some`, or fails after `timeout`.
pub(crate) async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let until = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await? {
            return Ok(v);
        }
        if tokio::time::Instant::now() >= until {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// rustls' ring provider as the process default: reqwest (built without a
/// provider of its own) needs one before any client is built.
pub(crate) fn install_crypto_provider() {
    baton_worker::dial::install_crypto_provider();
}

/// A throwaway PKI for one TLS cluster, written under its directory (never
/// committed anywhere): a CA, the coordinators' certificate and the client
/// certificate of gateways and workers.
#[derive(Clone, Debug)]
pub(crate) struct TlsFiles {
    pub ca: PathBuf,
    /// For 127.0.0.1 and localhost; usable as server and as client certificate
    /// (coordinators present it when they call each other).
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// What gateways and workers present (client use only).
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

impl TlsFiles {
    pub(crate) fn generate(dir: &Path) -> Result<TlsFiles> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose as Eku, IsCa, Issuer, KeyPair,
            KeyUsagePurpose,
        };
        std::fs::create_dir_all(dir)?;
        let write = |name: &str, pem: String| -> Result<PathBuf> {
            let path = dir.join(name);
            std::fs::write(&path, pem)?;
            Ok(path)
        };
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name.push(DnType::CommonName, "baton test CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_pem = ca.self_signed(&ca_key)?.pem();
        let issuer = Issuer::new(ca, ca_key);
        let leaf = |names: Vec<String>, cn: &str, usages: Vec<Eku>| -> Result<(String, String)> {
            let key = KeyPair::generate()?;
            let mut params = CertificateParams::new(names)?;
            params.distinguished_name.push(DnType::CommonName, cn);
            params.extended_key_usages = usages;
            Ok((params.signed_by(&key, &issuer)?.pem(), key.serialize_pem()))
        };
        let (server_pem, server_key) = leaf(
            vec!["127.0.0.1".into(), "localhost".into()],
            "baton coordinator",
            vec![Eku::ServerAuth, Eku::ClientAuth],
        )?;
        let (client_pem, client_key) = leaf(Vec::new(), "baton client", vec![Eku::ClientAuth])?;
        Ok(TlsFiles {
            ca: write("ca.pem", ca_pem)?,
            server_cert: write("coordinator.pem", server_pem)?,
            server_key: write("coordinator.key", server_key)?,
            client_cert: write("client.pem", client_pem)?,
            client_key: write("client.key", client_key)?,
        })
    }
}

pub(crate) struct Proc {
    pub child: Child,
    pub addr: String,
    pub log: PathBuf,
}

impl Proc {
    pub(crate) fn kill9(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Identity created for the test through `baton admin`.
#[derive(Clone, Debug)]
pub(crate) struct Identity {
    pub org_id: String,
    pub project_id: String,
    pub gateway_id: String,
    pub user_token: String,
    pub other_user_token: String,
    pub admin_key: String,
    pub member_key: String,
    pub read_only_key: String,
    pub worker_token: String,
}

pub(crate) struct Cluster {
    pub dir: PathBuf,
    pub config: PathBuf,
    pub database_url: String,
    pub redis_prefix: String,
    pub id: Identity,
    pub coordinators: Vec<Proc>,
    pub gateways: Vec<Proc>,
    pub workers: Vec<Proc>,
    pub http: reqwest::Client,
    pub otlp_endpoint: Option<String>,
    /// Set when the cluster runs with TLS (`Settings::tls`).
    pub tls: Option<TlsFiles>,
    /// The binary each role starts from, where it is not `baton_bin()`
    /// (an earlier release, in the mixed-version run).
    pub binaries: std::collections::HashMap<&'static str, PathBuf>,
}

async fn run_cli(config: &Path, args: &[&str]) -> Result<Value> {
    let out = Command::new(baton_bin()).arg("admin").arg("--config").arg(config).args(args).output().await?;
    if !out.status.success() {
        bail!("baton admin {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

fn text(v: &Value, key: &str) -> Result<String> {
    v[key].as_str().map(str::to_owned).ok_or_else(|| anyhow!("no {key} in {v}"))
}

impl Cluster {
    /// A fresh database, config and identity; no processes yet.
    pub(crate) async fn new(settings: Settings) -> Result<Cluster> {
        install_crypto_provider();
        let suffix = random_suffix();
        let dir = std::env::temp_dir().join(format!("baton-it-{suffix}"));
        std::fs::create_dir_all(&dir)?;
        let tls = if settings.tls { Some(TlsFiles::generate(&dir.join("tls"))?) } else { None };
        // The creation time in the name lets the test script drop leftovers of
        // crashed runs without touching databases of runs still going.
        let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
        let db = format!("bt_it_{created}_{suffix}");
        let base = settings.postgres_url.clone().unwrap_or_else(postgres_url);
        {
            use sqlx::Connection as _;
            let mut admin = sqlx::PgConnection::connect(&base).await.context("postgres reachable")?;
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}"))).execute(&mut admin).await?;
        }
        let (prefix, _) = base.rsplit_once('/').ok_or_else(|| anyhow!("postgres url needs a database"))?;
        let database_url = format!("{prefix}/{db}");
        let mut key = [0u8; 32];
        getrandom::fill(&mut key)?;
        let redis_prefix = format!("bt_it_{suffix}");
        // Small pools: parallel tests with two coordinators each must stay well inside
        // Postgres' default 100 connections (CI runs them four at a time).
        let mut config = json!({
            "features": {
                "native_mcp_tasks": true,
                "mcp_tasks_compatibility": true,
                "mcp_tasks_principal_concurrency": settings.principal_concurrency,
                "mcp_tasks_project_concurrency": settings.project_concurrency,
                "mcp_tasks_organization_concurrency": settings.organization_concurrency,
                "mcp_tasks_backlog": settings.backlog,
                "mcp_tasks_retained_payload_bytes": settings.retained_payload_bytes,
            },
            "security": {
                "execution_payload_keys": [{"id": "k1", "key": base64::engine::general_purpose::STANDARD.encode(key)}],
                "cluster_secret": format!("{}{}{}{}", random_suffix(), random_suffix(), random_suffix(), random_suffix()),
            },
            "database": {"url": database_url, "max_connections": 4},
            "redis": if settings.redis_cluster_nodes.is_empty() {
                json!({"url": settings.redis_url.clone().unwrap_or_else(redis_url), "key_prefix": redis_prefix})
            } else {
                json!({"cluster_nodes": settings.redis_cluster_nodes, "key_prefix": redis_prefix})
            },
            "executions": {
                "lease_ms": settings.lease_ms,
                "owner_loss_grace_ms": settings.owner_loss_grace_ms,
                "sweep_interval_ms": 200,
                "poll_interval_ms": 500,
            },
        });
        if let Some(replica) = &settings.read_replica_url {
            // The replica has every database of its primary, this test's too.
            let (replica_prefix, _) =
                replica.rsplit_once('/').ok_or_else(|| anyhow!("replica url needs a database"))?;
            config["database"]["read_replica_url"] = json!(format!("{replica_prefix}/{db}"));
            config["database"]["read_replica_max_lag_ms"] = json!(settings.read_replica_max_lag_ms);
        }
        if let Some(t) = &tls {
            // Coordinators serve with the server certificate and require client
            // certificates; gateways and workers override cert/key with theirs.
            config["tls"] = json!({
                "ca_file": t.ca,
                "cert_file": t.server_cert,
                "key_file": t.server_key,
                "client_ca_file": t.ca,
            });
            // An `https://` OTLP collector of the test is verified with the same CA.
            config["telemetry"] = json!({"otlp_ca_file": t.ca});
        }
        let config_path = dir.join("baton.yaml");
        // JSON is YAML.
        std::fs::write(&config_path, serde_json::to_vec_pretty(&config)?)?;
        let status = Command::new(baton_bin()).arg("migrate").arg("--config").arg(&config_path).output().await?;
        if !status.status.success() {
            bail!("migrate failed: {}", String::from_utf8_lossy(&status.stderr));
        }
        let org = text(&run_cli(&config_path, &["create-org", "--name", "it"]).await?, "id")?;
        let project = text(&run_cli(&config_path, &["create-project", "--org", &org, "--name", "it"]).await?, "id")?;
        let gateway =
            text(&run_cli(&config_path, &["create-gateway", "--project", &project, "--name", "it"]).await?, "id")?;
        let token = |v: Value| text(&v, "token");
        let id = Identity {
            user_token: token(
                run_cli(&config_path, &["create-end-user-token", "--gateway", &gateway, "--user", "alice@example.com"])
                    .await?,
            )?,
            other_user_token: token(
                run_cli(&config_path, &["create-end-user-token", "--gateway", &gateway, "--user", "bob@example.com"])
                    .await?,
            )?,
            admin_key: token(
                run_cli(&config_path, &["create-api-key", "--project", &project, "--role", "admin"]).await?,
            )?,
            member_key: token(
                run_cli(&config_path, &["create-api-key", "--project", &project, "--role", "member"]).await?,
            )?,
            read_only_key: token(
                run_cli(&config_path, &["create-api-key", "--project", &project, "--role", "read_only"]).await?,
            )?,
            worker_token: token(run_cli(&config_path, &["create-worker-token", "--project", &project]).await?)?,
            org_id: org,
            project_id: project,
            gateway_id: gateway,
        };
        Ok(Cluster {
            dir,
            config: config_path,
            database_url,
            redis_prefix,
            id,
            coordinators: Vec::new(),
            gateways: Vec::new(),
            workers: Vec::new(),
            http: reqwest::Client::builder().pool_max_idle_per_host(64).build()?,
            otlp_endpoint: settings.otlp_endpoint.clone(),
            tls,
            binaries: Default::default(),
        })
    }

    /// How gateways and workers reach coordinator `i`.
    pub(crate) fn coordinator_url(&self, i: usize) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.coordinators[i].addr)
    }

    /// What a hand-made gRPC client needs to reach a coordinator of a TLS
    /// cluster: the cluster's CA and the gateways' and workers' client
    /// certificate. `None` for a plaintext cluster.
    pub(crate) fn client_tls(&self) -> Option<tonic::transport::ClientTlsConfig> {
        let t = self.tls.as_ref()?;
        let read = |p: &Path| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        Some(
            tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(read(&t.ca)))
                .identity(tonic::transport::Identity::from_pem(read(&t.client_cert), read(&t.client_key))),
        )
    }

    /// The client certificate for gateways and workers, as configuration overrides.
    fn client_identity_env(&self) -> Vec<(&'static str, String)> {
        match &self.tls {
            Some(t) => vec![
                ("BATON_TLS__CERT_FILE", t.client_cert.display().to_string()),
                ("BATON_TLS__KEY_FILE", t.client_key.display().to_string()),
            ],
            None => Vec::new(),
        }
    }

    /// Starts a role and waits for the log line that carries its address.
    async fn spawn(&self, role: &'static str, args: &[&str], env: &[(&str, String)], marker: &str) -> Result<Proc> {
        let n = self.coordinators.len() + self.gateways.len() + self.workers.len();
        let log = self.dir.join(format!("{role}-{n}-{}.log", random_suffix()));
        let mut cmd = Command::new(self.binaries.get(role).cloned().unwrap_or_else(baton_bin));
        cmd.arg(role).arg("--config").arg(&self.config).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.env("RUST_LOG", "info").stdout(Stdio::null()).stderr(Stdio::piped()).kill_on_drop(true);
        if let Some(endpoint) = &self.otlp_endpoint {
            cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint).env("OTEL_BSP_SCHEDULE_DELAY", "100");
        }
        let mut child = cmd.spawn()?;
        let stderr = child.stderr.take().ok_or_else(|| anyhow!("no stderr"))?;
        let (tx, rx) = oneshot::channel();
        let marker = marker.to_owned();
        let log_path = log.clone();
        tokio::spawn(async move {
            let mut tx = Some(tx);
            let mut file = tokio::fs::File::create(&log_path).await.ok();
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(f) = file.as_mut() {
                    let _ = f.write_all(format!("{line}\n").as_bytes()).await;
                }
                if line.contains(&marker)
                    && let Some(addr) = line.split("addr=").nth(1).and_then(|r| r.split_whitespace().next())
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(addr.to_owned());
                }
            }
        });
        let addr = tokio::time::timeout(Duration::from_secs(20), rx)
            .await
            .map_err(|_| anyhow!("{role} did not start; see {}", log.display()))?
            .map_err(|_| anyhow!("{role} exited; see {}", log.display()))?;
        Ok(Proc { child, addr, log })
    }

    pub(crate) async fn start_coordinator(&mut self) -> Result<usize> {
        self.start_coordinator_with(&[]).await
    }

    /// A coordinator with extra environment (configuration overrides).
    pub(crate) async fn start_coordinator_with(&mut self, extra: &[(&str, String)]) -> Result<usize> {
        let p = self.spawn("coordinator", &["--listen", "127.0.0.1:0"], extra, "coordinator listening").await?;
        self.coordinators.push(p);
        Ok(self.coordinators.len() - 1)
    }

    /// Restarts coordinator `i` on its previous address.
    pub(crate) async fn restart_coordinator(&mut self, i: usize) -> Result<()> {
        // A killed process frees its port only once it has exited.
        let _ = tokio::time::timeout(Duration::from_secs(10), self.coordinators[i].child.wait()).await;
        let addr = self.coordinators[i].addr.clone();
        let p = self.spawn("coordinator", &["--listen", &addr], &[], "coordinator listening").await?;
        self.coordinators[i] = p;
        Ok(())
    }

    pub(crate) async fn start_gateway(&mut self, coordinator: usize) -> Result<usize> {
        self.start_gateway_with(coordinator, &[]).await
    }

    /// A gateway with extra environment (configuration overrides).
    pub(crate) async fn start_gateway_with(&mut self, coordinator: usize, extra: &[(&str, String)]) -> Result<usize> {
        let mut env = vec![("BATON_GATEWAY__COORDINATOR_URL", self.coordinator_url(coordinator))];
        env.extend(self.client_identity_env());
        env.extend(extra.iter().cloned());
        let p = self.spawn("gateway", &["--listen", "127.0.0.1:0"], &env, "gateway listening").await?;
        self.gateways.push(p);
        Ok(self.gateways.len() - 1)
    }

    /// Restarts gateway `i` on its previous address, talking to `coordinator`.
    pub(crate) async fn restart_gateway(&mut self, i: usize, coordinator: usize) -> Result<()> {
        let _ = tokio::time::timeout(Duration::from_secs(10), self.gateways[i].child.wait()).await;
        let addr = self.gateways[i].addr.clone();
        let mut env = vec![("BATON_GATEWAY__COORDINATOR_URL", self.coordinator_url(coordinator))];
        env.extend(self.client_identity_env());
        let p = self.spawn("gateway", &["--listen", &addr], &env, "gateway listening").await?;
        self.gateways[i] = p;
        Ok(())
    }

    pub(crate) async fn start_worker(&mut self, coordinator: usize) -> Result<usize> {
        self.start_worker_with(coordinator, &[]).await
    }

    /// A worker that also serves remote MCP servers: `remote_servers` is the
    /// YAML flow sequence of `worker.remote_servers`, e.g.
    /// `[{url: "http://127.0.0.1:8000/mcp"}]` (`BATON_WORKER__REMOTE_SERVERS`).
    pub(crate) async fn start_worker_remote(&mut self, coordinator: usize, remote_servers: &str) -> Result<usize> {
        self.start_worker_with(coordinator, &[("BATON_WORKER__REMOTE_SERVERS", remote_servers.to_owned())]).await
    }

    /// A worker with extra environment (configuration overrides).
    pub(crate) async fn start_worker_with(&mut self, coordinator: usize, extra: &[(&str, String)]) -> Result<usize> {
        let mut env = vec![
            ("BATON_WORKER__COORDINATOR_URL", self.coordinator_url(coordinator)),
            ("BATON_WORKER__TOKEN", self.id.worker_token.clone()),
            ("BATON_WORKER__METRICS_LISTEN", "127.0.0.1:0".to_owned()),
        ];
        env.extend(self.client_identity_env());
        env.extend(extra.iter().cloned());
        let p = self.spawn("worker", &["--examples"], &env, "worker metrics listening").await?;
        self.workers.push(p);
        let i = self.workers.len() - 1;
        let log = self.workers[i].log.clone();
        eventually(Duration::from_secs(20), "worker registration", || {
            let log = log.clone();
            async move { Ok(std::fs::read_to_string(&log)?.contains("registered").then_some(())) }
        })
        .await?;
        Ok(i)
    }

    /// One coordinator, one gateway, one worker.
    pub(crate) async fn single(settings: Settings) -> Result<Cluster> {
        let mut c = Cluster::new(settings).await?;
        c.start_coordinator().await?;
        c.start_gateway(0).await?;
        c.start_worker(0).await?;
        Ok(c)
    }

    pub(crate) fn rest_base(&self, gateway: usize) -> String {
        format!("http://{}/v1/orgs/{}/projects/{}", self.gateways[gateway].addr, self.id.org_id, self.id.project_id)
    }

    /// Total invocations of `tool` reported by every live worker's /metrics.
    pub(crate) async fn invocations(&self, tool: &str) -> Result<u64> {
        let mut total = 0;
        for w in self.workers.iter().filter(|w| w.child.id().is_some()) {
            let Ok(counts) = worker_counts(&self.http, &w.addr).await else { continue };
            total += counts.get(tool).copied().unwrap_or(0);
        }
        Ok(total)
    }

    /// Runs `baton admin` against this cluster's database.
    pub(crate) async fn admin(&self, args: &[&str]) -> Result<Value> {
        run_cli(&self.config, args).await
    }

    pub(crate) async fn db(&self) -> Result<sqlx::PgConnection> {
        use sqlx::Connection as _;
        Ok(sqlx::PgConnection::connect(&self.database_url).await?)
    }
}

/// Invocations per tool from one worker's /metrics (its own counters).
pub(crate) async fn worker_counts(
    http: &reqwest::Client,
    addr: &str,
) -> Result<std::collections::BTreeMap<String, u64>> {
    let text = http.get(format!("http://{addr}/metrics")).send().await?.text().await?;
    let mut counts = std::collections::BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("baton_worker_tool_invocations_total{tool=\"")
            && let Some((tool, n)) = rest.split_once("\"} ")
        {
            counts.insert(tool.to_owned(), n.trim().parse::<u64>()?);
        }
    }
    Ok(counts)
}

/// A REST client bound to one gateway and one bearer.
pub(crate) struct Rest {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
    pub gateway_id: String,
}

pub(crate) struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub bytes: Vec<u8>,
}

impl Reply {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or(Value::Null)
    }
}

impl Rest {
    pub(crate) async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        key: Option<&str>,
    ) -> Result<Reply> {
        let mut req = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        let resp = req.send().await?;
        Ok(Reply {
            status: resp.status().as_u16(),
            headers: resp.headers().clone(),
            bytes: resp.bytes().await?.to_vec(),
        })
    }

    pub(crate) async fn start(&self, tool: &str, input: Value, key: Option<&str>) -> Result<Reply> {
        let body =
            json!({"gateway_id": self.gateway_id, "tool_name": tool, "input": input, "user_id": "alice@example.com"});
        self.send(reqwest::Method::POST, "/tool-executions", Some(body), key).await
    }

    pub(crate) async fn get(&self, path: &str) -> Result<Reply> {
        self.send(reqwest::Method::GET, path, None, None).await
    }

    pub(crate) async fn post(&self, path: &str, body: Value) -> Result<Reply> {
        self.send(reqwest::Method::POST, path, Some(body), None).await
    }

    /// Long-polls until the execution is terminal; returns its view.
    pub(crate) async fn until_terminal(&self, id: &str, timeout: Duration) -> Result<Value> {
        eventually(timeout, "a terminal status", || async {
            let r = self.get(&format!("/tool-executions/{id}?wait_ms=5000")).await?;
            let v = r.json();
            let terminal = matches!(v["status"].as_str(), Some("completed" | "failed" | "cancelled"));
            Ok(terminal.then_some(v))
        })
        .await
    }
}

impl Cluster {
    pub(crate) fn rest(&self, gateway: usize, token: &str) -> Rest {
        Rest {
            http: self.http.clone(),
            base: self.rest_base(gateway),
            token: token.to_owned(),
            gateway_id: self.id.gateway_id.clone(),
        }
    }

    /// One integer from the cluster's database.
    pub(crate) async fn scalar(&self, sql: &str) -> Result<i64> {
        let mut db = self.db().await?;
        Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned())).fetch_one(&mut db).await?)
    }
}

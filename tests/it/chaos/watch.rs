//! Watching the cluster: probes of a tenant of its own (recovery), the
//! admission-occupancy sampler, worker counters and cluster set-up helpers.

use super::*;

/// The probe tenant: its own organization, project, gateway id, end user and
/// worker, so a probe measures service, not a place in the load's admission queue.
pub(super) struct Probe {
    pub(super) http: reqwest::Client,
    pub(super) gateways: Vec<String>,
    pub(super) org: String,
    pub(super) project: String,
    pub(super) gateway_id: String,
    pub(super) token: String,
}

/// From `t0` until a fresh Demo.Echo started through gateway `gw` is seen
/// completed; `None` after `PROBE_TIMEOUT`.
pub(super) async fn probe(p: Arc<Probe>, gw: usize, t0: Instant, tag: String) -> Option<Duration> {
    let url = format!("http://{}/v1/orgs/{}/projects/{}/tool-executions", p.gateways[gw], p.org, p.project);
    let pause = || tokio::time::sleep(Duration::from_millis(100));
    for round in 0.. {
        let key = format!("probe-{tag}-{gw}-{round}");
        let body = json!({"gateway_id": p.gateway_id, "tool_name": "Demo.Echo", "input": {"text": key}});
        let id = loop {
            if t0.elapsed() > PROBE_TIMEOUT {
                return None;
            }
            let sent = p.http.post(&url).bearer_auth(&p.token).header("Idempotency-Key", &key).json(&body).send().await;
            if let Ok(resp) = sent
                && resp.status().as_u16() == 202
                && let Ok(v) = resp.json::<Value>().await
                && let Some(id) = v["execution_id"].as_str()
            {
                break id.to_owned();
            }
            pause().await;
        };
        loop {
            if t0.elapsed() > PROBE_TIMEOUT {
                return None;
            }
            let sent = p.http.get(format!("{url}/{id}?wait_ms=2000")).bearer_auth(&p.token).send().await;
            let status = match sent {
                Ok(resp) if resp.status().is_success() => {
                    resp.json::<Value>().await.ok().and_then(|v| v["status"].as_str().map(str::to_owned))
                }
                _ => None,
            };
            match status.as_deref() {
                Some("completed") => return Some(t0.elapsed()),
                Some("failed" | "cancelled") => break,
                Some(_) => {}
                None => pause().await,
            }
        }
    }
    None
}

/// The highest non-terminal counts seen per admission scope of the load's project.
#[derive(Default)]
pub(super) struct Occupancy {
    pub(super) max: [i64; 4],
    /// Stretches of time a scope was seen over its bound.
    pub(super) over: Vec<Excess>,
    pub(super) samples: u64,
}

pub(super) struct Excess {
    pub(super) scope: &'static str,
    pub(super) bound: i64,
    /// When it was first seen over, and during which phase.
    pub(super) from: String,
    pub(super) seconds: f64,
    pub(super) peak: i64,
}

pub(super) const SCOPES: [&str; 4] = ["principal", "project", "organization", "backlog"];

/// Samples the load project's admission scopes from Postgres every ~20 ms
/// (reconnecting across the Postgres restart) until `done`.
pub(super) fn sampler(
    url: String,
    s: Arc<Shared>,
    bounds: [i64; 4],
    done: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Occupancy> {
    tokio::spawn(async move {
        use sqlx::Connection as _;
        let sql = format!(
            "SELECT \
               (SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM executions \
                  WHERE project_id = $1 AND status IN {OPEN} GROUP BY user_id) AS per_user), \
               (SELECT COUNT(*) FROM executions WHERE project_id = $1 AND status IN {OPEN}), \
               (SELECT COUNT(*) FROM executions WHERE org_id = $2 AND status IN {OPEN}), \
               (SELECT COUNT(*) FROM executions WHERE project_id = $1 AND status = 'pending' AND started_at IS NULL)"
        );
        let mut o = Occupancy::default();
        let mut open: [Option<(Instant, Excess)>; 4] = Default::default();
        while !done.load(Ordering::Relaxed) {
            let Ok(mut db) = sqlx::PgConnection::connect(&url).await else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            while !done.load(Ordering::Relaxed) {
                let row = sqlx::query_as::<_, (i64, i64, i64, i64)>(sqlx::AssertSqlSafe(sql.clone()))
                    .bind(&s.project)
                    .bind(&s.org)
                    .fetch_one(&mut db)
                    .await;
                let Ok(row) = row else { break };
                o.samples += 1;
                let seen = [row.0, row.1, row.2, row.3];
                for (k, n) in seen.into_iter().enumerate() {
                    o.max[k] = o.max[k].max(n);
                    match (&mut open[k], n > bounds[k]) {
                        (Some((_, e)), true) => e.peak = e.peak.max(n),
                        (None, true) => {
                            let e =
                                Excess { scope: SCOPES[k], bound: bounds[k], from: s.when(), seconds: 0.0, peak: n };
                            open[k] = Some((Instant::now(), e));
                        }
                        (Some(_), false) => {
                            if let Some((since, mut e)) = open[k].take() {
                                e.seconds = since.elapsed().as_secs_f64();
                                o.over.push(e);
                            }
                        }
                        (None, false) => {}
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        for (since, mut e) in open.into_iter().flatten() {
            e.seconds = since.elapsed().as_secs_f64();
            o.over.push(e);
        }
        o
    })
}

pub(super) fn add_counts(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (tool, n) in from {
        *into.entry(tool.clone()).or_default() += n;
    }
}

/// Rewrites the cluster's configuration (JSON is YAML) before any role starts.
pub(super) fn patch_config(c: &Cluster, patch: impl FnOnce(&mut Value)) -> Result<()> {
    let mut config: Value = serde_json::from_slice(&std::fs::read(&c.config)?)?;
    patch(&mut config);
    std::fs::write(&c.config, serde_json::to_vec_pretty(&config)?)?;
    Ok(())
}

pub(super) fn text(v: &Value, key: &str) -> Result<String> {
    v[key].as_str().map(str::to_owned).ok_or_else(|| anyhow!("no {key} in {v}"))
}

pub(super) async fn probe_tenant(c: &Cluster, http: &reqwest::Client) -> Result<(Probe, String)> {
    let org = text(&c.admin(&["create-org", "--name", "probe"]).await?, "id")?;
    probe_tenant_in(c, http, org).await
}

/// The probe tenant in organization `org`, and its worker's token.
pub(super) async fn probe_tenant_in(c: &Cluster, http: &reqwest::Client, org: String) -> Result<(Probe, String)> {
    let project = text(&c.admin(&["create-project", "--org", &org, "--name", "probe"]).await?, "id")?;
    let gateway_id = text(&c.admin(&["create-gateway", "--project", &project, "--name", "probe"]).await?, "id")?;
    let token = text(
        &c.admin(&["create-end-user-token", "--gateway", &gateway_id, "--user", "probe@example.com"]).await?,
        "token",
    )?;
    let worker_token = text(&c.admin(&["create-worker-token", "--project", &project]).await?, "token")?;
    let gateways = c.gateways.iter().map(|g| g.addr.clone()).collect();
    Ok((Probe { http: http.clone(), gateways, org, project, gateway_id, token }, worker_token))
}

/// One fault and how long each gateway took to serve a fresh round trip after it.
pub(super) struct Recovery {
    pub(super) fault: String,
    /// By gateway.
    pub(super) via: Vec<Option<Duration>>,
}

/// One probe per gateway.
pub(super) type Probes = Vec<tokio::task::JoinHandle<Option<Duration>>>;

pub(super) fn spawn_probes(p: &Arc<Probe>, t0: Instant, tag: &str) -> Probes {
    (0..p.gateways.len()).map(|gw| tokio::spawn(probe(p.clone(), gw, t0, tag.to_owned()))).collect()
}

pub(super) async fn join_probes(fault: &str, probes: Probes) -> Recovery {
    let via = futures_util::future::join_all(probes).await.into_iter().map(|r| r.ok().flatten()).collect();
    Recovery { fault: fault.to_owned(), via }
}

pub(super) fn secs(d: Option<Duration>) -> String {
    d.map_or_else(|| "not recovered".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()))
}

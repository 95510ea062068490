//! Workers are untrusted: a hand-written gRPC client, holding real worker
//! credentials of this project or another, tries every message a hostile worker
//! could send against a real cluster (two coordinators, one gateway, two
//! workers, Postgres and Redis). None of it may touch an execution it does not
//! hold. Every test runs once in plaintext and once with TLS on every hop.

use crate::harness::{Cluster, Rest, Settings, eventually};
use anyhow::{Context as _, Result, anyhow, bail};
use baton_proto::coordinator::v1::{DeliverCancelRequest, peer_client::PeerClient};
use baton_proto::worker::v1::{
    self as wpb, CoordinatorMessage, WorkerMessage, coordinator_message::Msg, settlement, worker_message,
    worker_session_client::WorkerSessionClient,
};
use futures_util::FutureExt as _;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};

/// A second tenant in the same organization, made through `baton admin`.
struct Tenant {
    project_id: String,
    gateway_id: String,
    admin_key: String,
    worker_token: String,
}

async fn other_tenant(c: &Cluster) -> Result<Tenant> {
    let text = |v: Value, k: &str| v[k].as_str().map(str::to_owned).ok_or_else(|| anyhow!("no {k} in {v}"));
    let project_id = text(c.admin(&["create-project", "--org", &c.id.org_id, "--name", "other"]).await?, "id")?;
    let gateway_id = text(c.admin(&["create-gateway", "--project", &project_id, "--name", "other"]).await?, "id")?;
    let admin_key = text(c.admin(&["create-api-key", "--project", &project_id, "--role", "admin"]).await?, "token")?;
    let worker_token = text(c.admin(&["create-worker-token", "--project", &project_id]).await?, "token")?;
    Ok(Tenant { project_id, gateway_id, admin_key, worker_token })
}

/// The cluster the issue describes: two coordinators, one gateway, two workers.
async fn cluster(settings: Settings) -> Result<Cluster> {
    let mut c = Cluster::new(settings).await?;
    c.start_coordinator().await?;
    c.start_coordinator().await?;
    c.start_gateway(0).await?;
    c.start_worker(0).await?;
    c.start_worker(1).await?;
    Ok(c)
}

/// A channel to coordinator `i`, speaking TLS (with a client certificate) when the cluster does.
pub(crate) async fn channel(c: &Cluster, i: usize, window: Option<u32>) -> Result<Channel> {
    let mut endpoint = Endpoint::from_shared(c.coordinator_url(i))?.initial_stream_window_size(window);
    if let Some(tls) = c.client_tls() {
        endpoint = endpoint.tls_config(tls)?;
    }
    Ok(endpoint.connect().await?)
}

pub(crate) fn tool(name: &str) -> wpb::ToolRegistration {
    wpb::ToolRegistration {
        name: name.into(),
        toolkit_name: "Trust".into(),
        toolkit_version: "1.0.0".into(),
        description: "a tool a hostile worker serves".into(),
        input_schema_json: r#"{"type":"object"}"#.into(),
        background: wpb::BackgroundPolicy::Optional as i32,
        max_attempts: 1,
        ..Default::default()
    }
}

/// A worker session driven by hand.
pub(crate) struct Hostile {
    tx: mpsc::Sender<WorkerMessage>,
    rx: tonic::Streaming<CoordinatorMessage>,
}

fn wrap(m: worker_message::Msg) -> WorkerMessage {
    WorkerMessage { msg: Some(m) }
}

impl Hostile {
    /// Registers; the coordinator's refusal comes back as the status.
    pub(crate) async fn register(
        channel: Channel,
        token: &str,
        worker_id: &str,
        tools: Vec<wpb::ToolRegistration>,
        capacity: u32,
    ) -> Result<Result<Hostile, tonic::Status>> {
        let (tx, rx) = mpsc::channel(64);
        let register = wpb::Register {
            worker_id: worker_id.into(),
            worker_token: token.into(),
            tools,
            capacity,
            ..Default::default()
        };
        tx.send(wrap(worker_message::Msg::Register(register))).await?;
        let mut client = WorkerSessionClient::new(channel);
        Ok(match client.session(ReceiverStream::new(rx)).await {
            Ok(resp) => Ok(Hostile { tx, rx: resp.into_inner() }),
            Err(status) => Err(status),
        })
    }

    pub(crate) async fn send(&self, m: worker_message::Msg) -> Result<()> {
        self.tx.send(wrap(m)).await.map_err(|_| anyhow!("session closed"))
    }

    /// The next message `pick` accepts, skipping others; fails after `within`.
    pub(crate) async fn next<T>(&mut self, within: Duration, mut pick: impl FnMut(Msg) -> Option<T>) -> Result<T> {
        let until = tokio::time::Instant::now() + within;
        loop {
            let m = tokio::time::timeout_at(until, self.rx.message())
                .await
                .context("no matching message in time")??
                .ok_or_else(|| anyhow!("stream ended"))?;
            if let Some(t) = m.msg.and_then(&mut pick) {
                return Ok(t);
            }
        }
    }
}

fn refused(kind: wpb::MessageKind) -> impl FnMut(Msg) -> Option<wpb::Refused> {
    move |m| match m {
        Msg::Refused(r) if r.kind() == kind => Some(r),
        _ => None,
    }
}

async fn start(rest: &Rest, tool: &str, input: Value) -> Result<String> {
    let r = rest.start(tool, input, None).await?;
    if r.status != 202 {
        bail!("start answered {}: {}", r.status, String::from_utf8_lossy(&r.bytes));
    }
    Ok(r.json()["execution_id"].as_str().ok_or_else(|| anyhow!("no id"))?.to_owned())
}

/// The execution's lease holder and attempt, once it is running.
pub(crate) async fn lease(c: &Cluster, id: &str) -> Result<(String, u32)> {
    eventually(Duration::from_secs(20), "the execution to be leased", || async {
        let mut db = c.db().await?;
        let row: Option<(Option<String>, Option<i64>)> =
            sqlx::query_as("SELECT worker_id, lease_attempt FROM executions WHERE id = $1 AND status = 'working'")
                .bind(id)
                .fetch_optional(&mut db)
                .await?;
        Ok(row.and_then(|(w, a)| Some((w?, u32::try_from(a?).ok()?))))
    })
    .await
}

fn forged_settlement(id: &str, attempt: u32) -> worker_message::Msg {
    worker_message::Msg::Settlement(wpb::Settlement {
        execution_id: id.into(),
        attempt,
        outcome: Some(settlement::Outcome::ResultJson(r#"{"content":[{"type":"text","text":"FORGED"}]}"#.into())),
    })
}

async fn forged_messages_change_nothing(settings: Settings) -> Result<()> {
    let c = cluster(settings).await?;
    let other = other_tenant(&c).await?;
    let alice = c.rest(0, &c.id.user_token);
    let id = start(&alice, "Demo.Sleep", json!({"seconds": 6})).await?;
    let (holder, attempt) = lease(&c, &id).await?;

    // A worker of another project, and a worker of this project that does not
    // hold the lease, each try to settle it, keep it, and mark input relayed.
    for (who, token) in [("foreign", other.worker_token.as_str()), ("same-tenant", c.id.worker_token.as_str())] {
        let mut h = Hostile::register(channel(&c, 0, None).await?, token, &format!("evil-{who}"), vec![], 4)
            .await?
            .map_err(|s| anyhow!("{who} registration: {s}"))?;
        h.send(forged_settlement(&id, attempt)).await?;
        let r = h.next(Duration::from_secs(10), refused(wpb::MessageKind::Settlement)).await?;
        assert_eq!((r.execution_id.as_str(), r.code.as_str()), (id.as_str(), "permission_denied"), "{who}");
        h.send(worker_message::Msg::InputDelivered(wpb::InputDelivered {
            execution_id: id.clone(),
            attempt,
            remote_key: "k".into(),
        }))
        .await?;
        h.next(Duration::from_secs(10), refused(wpb::MessageKind::InputDelivered)).await?;
        h.send(worker_message::Msg::RemoteTaskStarted(wpb::RemoteTaskStarted {
            execution_id: id.clone(),
            attempt,
            remote_task_id: "stolen".into(),
            remote_ttl_ms: i64::MAX,
        }))
        .await?;
        h.next(Duration::from_secs(10), refused(wpb::MessageKind::RemoteTask)).await?;
        h.send(worker_message::Msg::Heartbeat(wpb::Heartbeat {
            running: vec![wpb::RunningAttempt { execution_id: id.clone(), attempt }],
            free_slots: u32::MAX,
            settling: vec![],
        }))
        .await?;
        h.next(Duration::from_secs(10), refused(wpb::MessageKind::Heartbeat)).await?;
        // Declining the holder's assignment: not this worker's to give back.
        // As a 0.1 worker declines: the string only, no `cause`.
        #[allow(deprecated)]
        let declined =
            wpb::AssignmentDeclined { execution_id: id.clone(), attempt, reason: "at_capacity".into(), cause: 0 };
        h.send(worker_message::Msg::Declined(declined)).await?;
    }

    // Registering under the holder's worker id with another credential is
    // refused and reclaims nothing.
    let hijack = Hostile::register(channel(&c, 1, None).await?, &other.worker_token, &holder, vec![], 4).await?;
    match hijack {
        Err(status) => assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status}"),
        Ok(_) => bail!("a foreign credential registered another worker's id"),
    }

    // Peers need the cluster credential: no credential, a worker's bearer, a forged token.
    for (label, key, value) in [
        ("none", None, String::new()),
        ("worker bearer", Some("authorization"), format!("Bearer {}", c.id.worker_token)),
        ("forged", Some("x-baton-peer"), "v1.0.AAAA".to_owned()),
    ] {
        let mut peer = PeerClient::new(channel(&c, 0, None).await?);
        let mut req = tonic::Request::new(DeliverCancelRequest {
            worker_id: holder.clone(),
            execution_id: id.clone(),
            attempt,
            reason: wpb::StopReason::Cancelled as i32,
        });
        if let Some(key) = key {
            req.metadata_mut().insert(key, value.parse()?);
        }
        let err = peer.deliver_cancel(req).await.err().ok_or_else(|| anyhow!("peer call `{label}` accepted"))?;
        assert!(matches!(err.code(), tonic::Code::Unauthenticated | tonic::Code::PermissionDenied), "{label}: {err}");
    }

    let done = alice.until_terminal(&id, Duration::from_secs(30)).await?;
    assert_eq!(done["status"], "completed", "{done}");
    let result = alice.get(&format!("/tool-executions/{id}/result")).await?;
    let text = String::from_utf8_lossy(&result.bytes);
    assert!(text.contains("slept 6 s") && !text.contains("FORGED"), "{text}");
    assert_eq!(c.invocations("Demo.Sleep").await?, 1, "the tool ran exactly once");
    let holders =
        c.scalar(&format!("SELECT COUNT(DISTINCT worker_id) FROM attempts WHERE execution_id = '{id}'")).await?;
    assert_eq!(holders, 1, "no attempt moved to another worker");
    // The forged remote task was never recorded.
    assert_eq!(
        c.scalar(&format!("SELECT COUNT(*) FROM executions WHERE id = '{id}' AND remote_task_id IS NOT NULL")).await?,
        0
    );
    Ok(())
}

async fn a_stuck_worker_holds_up_nobody(settings: Settings) -> Result<()> {
    let c = cluster(settings).await?;
    let other = other_tenant(&c).await?;
    // Another project's worker registers a tool with a huge capacity and never
    // reads its stream (a tiny HTTP/2 window keeps everything queued on our side).
    let stuck = Hostile::register(
        channel(&c, 0, Some(1024)).await?,
        &other.worker_token,
        "stuck",
        vec![tool("Stuck.Tool")],
        u32::MAX,
    )
    .await?
    .map_err(|s| anyhow!("registration: {s}"))?;
    let theirs = Rest {
        http: c.http.clone(),
        base: format!("http://{}/v1/orgs/{}/projects/{}", c.gateways[0].addr, c.id.org_id, other.project_id),
        token: other.admin_key.clone(),
        gateway_id: other.gateway_id.clone(),
    };
    let mut started = 0;
    for chunk in 0..16 {
        let starts = (0..100).map(|i| theirs.start("Stuck.Tool", json!({"n": chunk * 100 + i}), None));
        for r in futures_util::future::join_all(starts).await {
            let r = r?;
            assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.bytes));
            started += 1;
        }
    }
    assert_eq!(started, 1_600);
    // Counted from the attempt history: on a slow machine the 1,600 starts
    // outlast lease and grace, so the first assignments may already have
    // lapsed into owner_lost (and left the executions' rows) by now.
    eventually(Duration::from_secs(20), "the stuck worker to hold assignments", || async {
        let n = c.scalar("SELECT COUNT(*) FROM attempts WHERE worker_id = 'stuck'").await?;
        Ok((n > 0).then_some(()))
    })
    .await?;
    // This project's work still flows on both replicas, and deadlines still fire.
    let alice = c.rest(0, &c.id.user_token);
    let echo = start(&alice, "Demo.Echo", json!({"text": "still here"})).await?;
    let short = alice
        .send(
            reqwest::Method::POST,
            "/tool-executions",
            Some(json!({"gateway_id": c.id.gateway_id, "tool_name": "Demo.Sleep", "input": {"seconds": 30}, "ttl_ms": 1000})),
            None,
        )
        .await?;
    assert_eq!(short.status, 202, "{}", String::from_utf8_lossy(&short.bytes));
    let short = short.json()["execution_id"].as_str().ok_or_else(|| anyhow!("no id"))?.to_owned();
    let done = alice.until_terminal(&echo, Duration::from_secs(10)).await?;
    assert_eq!(done["status"], "completed", "{done}");
    let expired = alice.until_terminal(&short, Duration::from_secs(10)).await?;
    assert_eq!(
        (expired["status"].as_str(), expired["failure_reason"].as_str()),
        (Some("failed"), Some("deadline_exceeded")),
        "{expired}"
    );
    // The stuck session never held more than the configured maximum capacity.
    let held = c.scalar("SELECT COUNT(*) FROM executions WHERE worker_id = 'stuck' AND status = 'working'").await?;
    assert!(held <= 512, "a session holds at most max_worker_capacity assignments, held {held}");
    drop(stuck);
    Ok(())
}

async fn revocation_reaches_sessions_and_waits(settings: Settings) -> Result<()> {
    let c = cluster(settings).await?;
    let spare = c.admin(&["create-worker-token", "--project", &c.id.project_id]).await?;
    let (spare_id, spare_token) = (
        spare["id"].as_str().ok_or_else(|| anyhow!("no id"))?.to_owned(),
        spare["token"].as_str().ok_or_else(|| anyhow!("no token"))?.to_owned(),
    );
    let mut h =
        Hostile::register(channel(&c, 1, None).await?, &spare_token, "soon-revoked", vec![tool("Trust.Revoked")], 8)
            .await?
            .map_err(|s| anyhow!("registration: {s}"))?;
    h.next(Duration::from_secs(10), |m| matches!(m, Msg::Registered(_)).then_some(())).await?;
    c.admin(&["revoke", "--id", &spare_id]).await?;
    // Within a heartbeat interval the session ends with `unauthenticated`.
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match h.rx.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => return None,
                Err(status) => return Some(status),
            }
        }
    })
    .await
    .context("the revoked session stayed open")?;
    assert_eq!(ended.map(|s| s.code()), Some(tonic::Code::Unauthenticated));
    // Nothing more reaches it: work for its tool stays pending, and it cannot come back.
    let alice = c.rest(0, &c.id.user_token);
    let orphan = start(&alice, "Trust.Revoked", json!({})).await?;
    let again = Hostile::register(channel(&c, 0, None).await?, &spare_token, "soon-revoked", vec![], 8).await?;
    assert_eq!(again.err().map(|s| s.code()), Some(tonic::Code::Unauthenticated));
    let status = alice.get(&format!("/tool-executions/{orphan}")).await?.json();
    assert_eq!(status["status"], "pending", "{status}");

    // An owner revoked during a long poll gets 401 when the wait answers.
    let token =
        c.admin(&["create-end-user-token", "--gateway", &c.id.gateway_id, "--user", "carol@example.com"]).await?;
    let (carol_id, carol_token) = (
        token["id"].as_str().ok_or_else(|| anyhow!("no id"))?.to_owned(),
        token["token"].as_str().ok_or_else(|| anyhow!("no token"))?.to_owned(),
    );
    let carol = c.rest(0, &carol_token);
    let body = json!({"gateway_id": c.id.gateway_id, "tool_name": "Demo.Sleep", "input": {"seconds": 2}});
    let started = carol.send(reqwest::Method::POST, "/tool-executions", Some(body), None).await?;
    assert_eq!(started.status, 202, "{}", String::from_utf8_lossy(&started.bytes));
    let id = started.json()["execution_id"].as_str().ok_or_else(|| anyhow!("no id"))?.to_owned();
    lease(&c, &id).await?;
    let wait = {
        let carol = c.rest(0, &carol_token);
        let path = format!("/tool-executions/{id}?wait_ms=20000");
        tokio::spawn(async move { carol.get(&path).await })
    };
    c.admin(&["revoke", "--id", &carol_id]).await?;
    let answer = wait.await??;
    assert_eq!(answer.status, 401, "{}", String::from_utf8_lossy(&answer.bytes));
    Ok(())
}

async fn a_lost_stop_is_sent_again(settings: Settings) -> Result<()> {
    let c = cluster(settings).await?;
    let mut h =
        Hostile::register(channel(&c, 0, None).await?, &c.id.worker_token, "forgetful", vec![tool("Trust.Slow")], 4)
            .await?
            .map_err(|s| anyhow!("registration: {s}"))?;
    let alice = c.rest(0, &c.id.user_token);
    let id = start(&alice, "Trust.Slow", json!({})).await?;
    let attempt = h
        .next(Duration::from_secs(10), |m| match m {
            Msg::Assignment(a) => Some(a.attempt),
            _ => None,
        })
        .await?;
    let cancel = alice.post(&format!("/tool-executions/{id}/cancel"), json!({})).await?;
    assert_eq!(cancel.status, 200, "{}", String::from_utf8_lossy(&cancel.bytes));
    let is_stop = |id: String| {
        move |m: Msg| {
            matches!(m, Msg::Stop(s) if s.execution_id == id && s.reason() == wpb::StopReason::Cancelled).then_some(())
        }
    };
    // The first stop is "lost": ignored. The next heartbeat brings it again.
    h.next(Duration::from_secs(10), is_stop(id.clone())).await?;
    let heartbeat = worker_message::Msg::Heartbeat(wpb::Heartbeat {
        running: vec![wpb::RunningAttempt { execution_id: id.clone(), attempt }],
        free_slots: 3,
        settling: vec![],
    });
    h.send(heartbeat).await?;
    h.next(Duration::from_secs(10), is_stop(id.clone())).await?;
    h.send(worker_message::Msg::Settlement(wpb::Settlement {
        execution_id: id.clone(),
        attempt,
        outcome: Some(settlement::Outcome::Cancelled(true)),
    }))
    .await?;
    let done = alice.until_terminal(&id, Duration::from_secs(10)).await?;
    assert_eq!(done["status"], "cancelled", "{done}");
    Ok(())
}

/// A settlement the coordinator is slow to store (here: one not sent yet)
/// outlives the lease while the worker lists it as settling in its heartbeats.
#[tokio::test]
async fn an_attempt_being_settled_keeps_its_lease() {
    let short = Settings { lease_ms: 1_000, owner_loss_grace_ms: 1_000, ..Settings::default() };
    let c = cluster(short).await.expect("cluster");
    let mut h = Hostile::register(
        channel(&c, 0, None).await.expect("channel"),
        &c.id.worker_token,
        "settler",
        vec![tool("Trust.Slow")],
        4,
    )
    .await
    .expect("session")
    .expect("registered");
    let alice = c.rest(0, &c.id.user_token);
    let id = start(&alice, "Trust.Slow", json!({})).await.expect("start");
    let attempt = h
        .next(Duration::from_secs(10), |m| match m {
            Msg::Assignment(a) => Some(a.attempt),
            _ => None,
        })
        .await
        .expect("assignment");
    let settling = wpb::RunningAttempt { execution_id: id.clone(), attempt };
    // Four lease lengths of heartbeats that name the attempt only as settling.
    let mut ticks = tokio::time::interval(Duration::from_millis(200));
    for _ in 0..20 {
        ticks.tick().await;
        let hb = wpb::Heartbeat { running: vec![], free_slots: 4, settling: vec![settling.clone()] };
        h.send(worker_message::Msg::Heartbeat(hb)).await.expect("heartbeat");
    }
    h.send(worker_message::Msg::Settlement(wpb::Settlement {
        execution_id: id.clone(),
        attempt,
        outcome: Some(settlement::Outcome::ResultJson(
            r#"{"content":[{"type":"text","text":"late but held"}]}"#.into(),
        )),
    }))
    .await
    .expect("settlement");
    let done = alice.until_terminal(&id, Duration::from_secs(10)).await.expect("terminal");
    assert_eq!(done["status"], "completed", "{done}");
}

macro_rules! both_transports {
    ($name:ident) => {
        mod $name {
            use crate::harness::Settings;

            #[tokio::test]
            async fn plaintext() {
                super::$name(Settings::default()).await.expect(stringify!($name));
            }

            #[tokio::test]
            async fn tls() {
                super::$name(Settings { tls: true, ..Settings::default() }).await.expect(stringify!($name));
            }
        }
    };
}

both_transports!(forged_messages_change_nothing);
both_transports!(a_stuck_worker_holds_up_nobody);
both_transports!(revocation_reaches_sessions_and_waits);
both_transports!(a_lost_stop_is_sent_again);

/// A TCP relay between a worker and its coordinator that can cut every
/// connection it carries, either by closing it (a reset stream) or by going
/// silent while keeping the sockets open (a half-open connection).
struct Relay {
    addr: std::net::SocketAddr,
    cut: tokio::sync::watch::Sender<(u64, bool)>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn start(target: String) -> Result<Relay> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (cut, watch) = tokio::sync::watch::channel((0u64, false));
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                let mut watch = watch.clone();
                let generation = watch.borrow().0;
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await else { return };
                    let silent = tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => return,
                        Ok(()) = watch.wait_for(|(g, _)| *g > generation).map(|r| r.map(|_| ())) => watch.borrow().1,
                    };
                    if silent {
                        // Hold both sockets open and forward nothing, forever.
                        std::future::pending::<()>().await;
                    }
                });
            }
        });
        Ok(Relay { addr, cut, task })
    }

    /// Ends every connection carried so far; later connections pass.
    fn cut(&self, silently: bool) {
        self.cut.send_modify(|(g, s)| {
            *g += 1;
            *s = silently;
        });
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A worker whose connection is cut (closed, or silently dropped) while it runs
/// ten tools: it notices, registers again with what it runs, and every
/// execution completes, once, with none failed `owner_lost`.
async fn a_cut_connection_loses_nothing(settings: Settings, silently: bool) -> Result<()> {
    let mut c = Cluster::new(settings).await?;
    c.start_coordinator().await?;
    c.start_gateway(0).await?;
    let target = c.coordinators[0].addr.clone();
    let relay = Relay::start(target).await?;
    let url = c.coordinator_url(0).replace(&c.coordinators[0].addr, &relay.addr.to_string());
    c.start_worker_with(0, &[("BATON_WORKER__COORDINATOR_URL", url)]).await?;
    let alice = c.rest(0, &c.id.user_token);
    let mut ids = Vec::new();
    for _ in 0..10 {
        ids.push(start(&alice, "Demo.Sleep", json!({"seconds": 6})).await?);
    }
    eventually(Duration::from_secs(20), "all ten running", || async {
        Ok((c.invocations("Demo.Sleep").await? == 10).then_some(()))
    })
    .await?;
    relay.cut(silently);
    for id in &ids {
        let done = alice.until_terminal(id, Duration::from_secs(60)).await?;
        assert_eq!(done["status"], "completed", "{done}");
    }
    assert_eq!(c.invocations("Demo.Sleep").await?, 10, "nothing ran twice");
    assert_eq!(c.scalar("SELECT COUNT(*) FROM executions WHERE failure_reason = 'owner_lost'").await?, 0);
    let log = std::fs::read_to_string(&c.workers[0].log)?;
    assert!(log.matches("registered").count() >= 2, "the worker registered again after the cut");
    Ok(())
}

mod a_cut_connection_loses_nothing {
    use crate::harness::Settings;

    #[tokio::test]
    async fn reset_plaintext() {
        super::a_cut_connection_loses_nothing(Settings::default(), false).await.expect("reset");
    }

    #[tokio::test]
    async fn half_open_plaintext() {
        super::a_cut_connection_loses_nothing(Settings::default(), true).await.expect("half-open");
    }

    #[tokio::test]
    async fn half_open_tls() {
        super::a_cut_connection_loses_nothing(Settings { tls: true, ..Settings::default() }, true)
            .await
            .expect("half-open over TLS");
    }
}

//! Redis admission's calls, gathered: the admissions, starts, releases and
//! withdrawals waiting when Redis answers the previous ones go together, one
//! script call per shard (`redis_scripts::OPS`), in the order they came. A
//! lone call goes at once. A busy coordinator so pays one round trip and one
//! look at the epoch for many executions, not one each, and Redis runs one
//! script where it ran one per execution and step.

use super::redis_keys::{Shard, shard_of};
use super::redis_scripts::{OPS, script};
use super::{Bounds, Error, Ticket, retention_bucket};
use crate::engine::batch::coalesce;
use crate::redis_link::Link;
use redis::Script;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{mpsc, oneshot};

/// Ops in one script call at most: Redis serves nothing else while it runs
/// (tens of microseconds an op).
const MAX_OPS: usize = 128;

/// How long a released execution's tombstone outlives it: longer than any
/// rebuild takes from reading its snapshot to writing it back.
const TOMBSTONE_MS: i64 = 120_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Admit,
    Started,
    Release,
    Withdraw,
}

impl Kind {
    fn code(self) -> &'static str {
        match self {
            Kind::Admit => "a",
            Kind::Started => "s",
            Kind::Release => "r",
            Kind::Withdraw => "w",
        }
    }
}

/// One execution's step, its keys named by the caller (off the batching
/// task, which only sends).
struct Op {
    kind: Kind,
    shard: u32,
    keys: Vec<String>,
    id: String,
    now_ms: i64,
    expires_at_ms: i64,
    payload_bytes: u64,
    meta_ttl_ms: i64,
    bucket: i64,
    /// The script's answer for this op: for an admission its verdict, for a
    /// release when the execution was admitted (nothing if released before).
    reply: oneshot::Sender<Result<Option<String>, Error>>,
}

impl coalesce::Job for Op {
    /// An admission nobody waits for any more is not made; every other step
    /// is, whoever waits: it gives a place back.
    fn abandoned(&self) -> bool {
        self.kind == Kind::Admit && self.reply.is_closed()
    }
}

impl Op {
    fn new(
        prefix: &str,
        kind: Kind,
        t: &Ticket,
        now_ms: i64,
    ) -> (Op, oneshot::Receiver<Result<Option<String>, Error>>) {
        let n = shard_of(&t.org_id);
        let shard = Shard::new(prefix, n);
        let keys = match kind {
            Kind::Started => vec![shard.backlog(&t.project_id)],
            _ => Vec::from(shard.ticket_keys(t)),
        };
        let (reply, answer) = oneshot::channel();
        let op = Op {
            kind,
            shard: n,
            keys,
            id: t.execution_id.clone(),
            now_ms,
            expires_at_ms: t.expires_at_ms,
            payload_bytes: t.payload_bytes,
            meta_ttl_ms: (t.expires_at_ms - now_ms).max(1_000),
            bucket: retention_bucket(t.retained_until_ms),
            reply,
        };
        (op, answer)
    }
}

/// The queue of ops and the task that sends them; the task ends when the
/// last handle is dropped.
pub(super) struct Batcher {
    ops: mpsc::Sender<Op>,
    prefix: String,
    /// Calls made to Redis (scripts, and backlog removals), for tests that count them.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) calls: Arc<AtomicUsize>,
}

impl Batcher {
    pub(super) fn start(con: Link, prefix: &str, bounds: Bounds) -> Batcher {
        let calls = Arc::new(AtomicUsize::new(0));
        let sender =
            Arc::new(Sender { con, script: script(OPS), prefix: prefix.to_owned(), bounds, calls: calls.clone() });
        let ops = coalesce::spawn(MAX_OPS, move |batch| {
            let sender = sender.clone();
            async move { sender.send(batch).await }
        });
        Batcher { ops, prefix: prefix.to_owned(), calls }
    }

    /// Runs `kind` for `t` with whatever else is waiting; answers the script's
    /// answer for it.
    pub(super) async fn call(&self, kind: Kind, t: &Ticket, now_ms: i64) -> Result<Option<String>, Error> {
        let (op, answer) = Op::new(&self.prefix, kind, t, now_ms);
        self.ops.try_send(op).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => {
                Error::Unavailable("too many admission calls waiting for Redis".into())
            }
            mpsc::error::TrySendError::Closed(_) => stopped(),
        })?;
        answer.await.map_err(|_| stopped())?
    }
}

fn stopped() -> Error {
    Error::Unavailable("admission is shutting down".into())
}

/// What the batching task holds.
struct Sender {
    con: Link,
    script: Script,
    prefix: String,
    bounds: Bounds,
    calls: Arc<AtomicUsize>,
}

impl Sender {
    /// One script call per shard the batch touches, all at once.
    async fn send(&self, batch: Vec<Op>) {
        let mut by_shard: BTreeMap<u32, Vec<Op>> = BTreeMap::new();
        for op in batch {
            by_shard.entry(op.shard).or_default().push(op);
        }
        futures_util::future::join_all(by_shard.into_iter().map(|(n, ops)| self.send_shard(n, ops))).await;
    }

    async fn send_shard(&self, n: u32, ops: Vec<Op>) {
        if ops.iter().all(|op| op.kind == Kind::Started) {
            return self.leave_backlogs(ops).await;
        }
        let shard = Shard::new(&self.prefix, n);
        let b = &self.bounds;
        let mut inv = self.script.prepare_invoke();
        inv.key(shard.epoch()).key(shard.epoch_run()).key(shard.index());
        inv.arg(b.principal_concurrency).arg(b.project_concurrency).arg(b.organization_concurrency);
        inv.arg(b.backlog).arg(b.retained_payload_bytes).arg(TOMBSTONE_MS);
        for op in &ops {
            for k in &op.keys {
                inv.key(k);
            }
            inv.arg(op.kind.code()).arg(&op.id).arg(op.now_ms).arg(op.expires_at_ms);
            inv.arg(op.payload_bytes).arg(op.meta_ttl_ms).arg(op.bucket);
        }
        self.calls.fetch_add(1, Ordering::Relaxed);
        let mut con = self.con.clone();
        let answers: Result<Vec<Option<String>>, _> = inv.invoke_async(&mut con).await;
        match answers {
            Ok(answers) if answers.len() == ops.len() => {
                for (op, answer) in ops.into_iter().zip(answers) {
                    let _ = op.reply.send(Ok(answer));
                }
            }
            Ok(answers) => {
                let e = format!("the admission script answered {} of {} steps", answers.len(), ops.len());
                fail(ops, &e);
            }
            Err(e) => fail_unavailable(ops, e),
        }
    }

    /// Starts alone need no script: each backlog loses its members in one
    /// `ZREM`, far cheaper for Redis than a script call when load is light.
    async fn leave_backlogs(&self, ops: Vec<Op>) {
        let mut by_key: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for op in &ops {
            if let Some(backlog) = op.keys.first() {
                by_key.entry(backlog).or_default().push(&op.id);
            }
        }
        let removals = by_key.into_iter().map(|(key, ids)| {
            let mut con = self.con.clone();
            async move { redis::cmd("ZREM").arg(key).arg(ids).query_async::<i64>(&mut con).await }
        });
        self.calls.fetch_add(1, Ordering::Relaxed);
        match futures_util::future::try_join_all(removals).await {
            Ok(_) => ops.into_iter().for_each(|op| {
                let _ = op.reply.send(Ok(None));
            }),
            Err(e) => fail_unavailable(ops, e),
        }
    }
}

/// A Redis error as admission reports it: unavailable (admission fails closed).
pub(super) fn unavailable(e: redis::RedisError) -> Error {
    crate::engine::metrics::redis_error("admission");
    Error::Unavailable(e.to_string())
}

fn fail_unavailable(ops: Vec<Op>, e: redis::RedisError) {
    let Error::Unavailable(e) = unavailable(e);
    fail(ops, &e)
}

fn fail(ops: Vec<Op>, e: &str) {
    for op in ops {
        let _ = op.reply.send(Err(Error::Unavailable(e.to_owned())));
    }
}

//! Retiring a payload key (decision 0045). The ring's first key seals, every
//! key opens; old values are never re-sealed by traffic, so a key can leave
//! the ring only once `rewrap` has re-sealed every retained value it seals
//! under the first key. A coordinator checks at start that its ring holds
//! every key id that may still seal a retained value (`check_ring`).

use crate::audit::{self, Actor, Record, action, outcome};
use crate::crypto::KeyRing;
use crate::domain::Millis;
use crate::store::{self, KeyCounts, Replacement, SEALED_TABLES, Store};
use baton_proto::clock::now_ms;
use std::collections::BTreeMap;

/// The command an operator runs to retire keys, named in refusals.
pub(crate) const REWRAP_COMMAND: &str = "baton admin payload-keys rewrap";

/// At most this many passes over the tables: another pass runs only when a
/// concurrent write replaced a value the previous one read.
const MAX_PASSES: usize = 5;

/// Notes the ring's sealing key, surveys the values written before key ids
/// were recorded (once per database), and answers the key ids that may seal
/// a retained value but are not in `ring`: a coordinator must not start
/// without them, or those values could no longer be read.
pub(crate) async fn check_ring(store: &Store, ring: &KeyRing, now: Millis) -> Result<Vec<String>, store::Error> {
    store.note_payload_key(ring.sealing_key_id(), now).await?;
    let in_use = surveyed(store, now).await?;
    Ok(in_use.into_keys().filter(|id| !ring.holds(id)).collect())
}

/// The key ids in use, after surveying the retained values if that is owed.
async fn surveyed(store: &Store, now: Millis) -> Result<BTreeMap<String, Millis>, store::Error> {
    let in_use = store.payload_keys_in_use().await?;
    if !in_use.contains_key("") {
        return Ok(in_use);
    }
    let counts = store.sealed_counts(now).await?;
    let found: Vec<&str> = counts.keys().map(String::as_str).collect();
    store.record_payload_key_survey(&found).await?;
    store.payload_keys_in_use().await
}

/// What `baton admin payload-keys status` shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub sealing_key_id: String,
    /// Retained values per key id (every recorded key id, 0 included).
    pub retained: KeyCounts,
    /// Key ids that seal retained values but are not in the ring.
    pub missing_from_ring: Vec<String>,
}

/// Counts the retained values per key id; changes nothing.
pub async fn status(store: &Store, ring: &KeyRing, now: Millis) -> Result<Status, store::Error> {
    let mut retained = store.sealed_counts(now).await?;
    for id in store.payload_keys_in_use().await?.into_keys().filter(|id| !id.is_empty()) {
        retained.entry(id).or_default();
    }
    let missing_from_ring =
        retained.iter().filter(|(id, n)| **n > 0 && !ring.holds(id)).map(|(id, _)| id.clone()).collect();
    Ok(Status { sealing_key_id: ring.sealing_key_id().to_owned(), retained, missing_from_ring })
}

/// Where a run is, after each batch.
#[derive(Debug)]
pub struct Progress<'a> {
    pub table: &'static str,
    /// Values re-sealed so far, per the key id they were sealed with.
    pub resealed: &'a KeyCounts,
    /// Values still to re-seal per key id (as counted at the start, less
    /// those re-sealed since).
    pub remaining: &'a KeyCounts,
}

/// How a run ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub sealing_key_id: String,
    /// Values re-sealed by this run, per the key id they were sealed with.
    pub resealed: KeyCounts,
    /// Values left as they were because their key is not in the ring, or
    /// they failed to open (the last pass's count).
    pub unopened: KeyCounts,
    /// Values a concurrent write replaced between the read and the re-seal.
    pub replaced_meanwhile: i64,
    /// Retained values per key id after the run (every recorded key id, 0
    /// included): 0 for every key but the first when the run is complete.
    pub retained: KeyCounts,
    /// Key ids no retained value names any more, now forgotten: a ring
    /// without them is accepted.
    pub retired: Vec<String>,
    /// Key ids with no retained value left that a coordinator noted during
    /// the run, so one still seals with them: not retired.
    pub still_sealing: Vec<String>,
}

/// Re-seals every retained value not sealed by the ring's first key, `batch`
/// rows at a time, each batch its own transaction; a value is replaced only
/// if it still holds what was read. Stopping and running again continues; a
/// run after a complete one changes nothing. Audited per organization whose
/// values it re-sealed.
pub async fn rewrap(
    store: &Store,
    ring: &KeyRing,
    batch: u32,
    mut on_progress: impl FnMut(&Progress<'_>),
) -> Result<Report, store::Error> {
    let started = now_ms();
    let first = ring.sealing_key_id().to_owned();
    store.note_payload_key(&first, started).await?;
    let in_use = surveyed(store, started).await?;
    let mut remaining: KeyCounts =
        store.sealed_counts(started).await?.into_iter().filter(|(id, _)| *id != first && !id.is_empty()).collect();
    let mut report = Report { sealing_key_id: first.clone(), ..Report::default() };
    let mut by_org: BTreeMap<String, KeyCounts> = BTreeMap::new();
    for _ in 0..MAX_PASSES {
        report.unopened.clear();
        let replaced_before = report.replaced_meanwhile;
        for t in &SEALED_TABLES {
            let mut after = None;
            loop {
                let rows = store.sealed_rows(t, after.as_ref(), &first, now_ms(), batch.max(1)).await?;
                let Some(last) = rows.last() else { break };
                after = Some(last.key.clone());
                let mut planned = Vec::new();
                let mut replacements = Vec::new();
                for row in &rows {
                    for (column, field, old) in &row.values {
                        let id = KeyRing::key_id_of(old).unwrap_or("").to_owned();
                        match ring.reseal(&row.aad_id, *field, old) {
                            Ok(new) => {
                                replacements.push(Replacement { key: row.key.clone(), column, old: old.clone(), new });
                                planned.push((id, row.org_id.clone()));
                            }
                            Err(_) => *report.unopened.entry(id).or_default() += 1,
                        }
                    }
                }
                let written = store.replace_sealed(t, &replacements).await?;
                for ((id, org), done) in planned.into_iter().zip(written) {
                    if !done {
                        report.replaced_meanwhile += 1;
                        continue;
                    }
                    if let Some(n) = remaining.get_mut(&id) {
                        *n = (*n - 1).max(0);
                    }
                    *by_org.entry(org).or_default().entry(id.clone()).or_default() += 1;
                    *report.resealed.entry(id).or_default() += 1;
                }
                on_progress(&Progress { table: t.name, resealed: &report.resealed, remaining: &remaining });
                if rows.len() < batch.max(1) as usize {
                    break;
                }
            }
        }
        if report.replaced_meanwhile == replaced_before {
            break;
        }
    }
    report.retained = store.sealed_counts(now_ms()).await?;
    for id in in_use.into_keys().filter(|id| !id.is_empty()) {
        report.retained.entry(id).or_default();
    }
    for (id, n) in &report.retained {
        if *id == first || id.is_empty() || *n > 0 {
            continue;
        }
        if store.retire_payload_key(id, started).await? {
            report.retired.push(id.clone());
        } else if store.payload_keys_in_use().await?.contains_key(id) {
            report.still_sealing.push(id.clone());
        }
    }
    for (org, counts) in &by_org {
        audit::append(store, &Actor::cli(), audit_record(org, &first, counts, &report.retired)).await?;
    }
    Ok(report)
}

/// The row that tells an organization its values were re-sealed: key ids
/// and counts only.
fn audit_record<'a>(org_id: &'a str, first: &str, counts: &KeyCounts, retired: &[String]) -> Record<'a> {
    let total: i64 = counts.values().sum();
    let from: Vec<String> = counts.iter().map(|(id, n)| format!("{id}: {n}")).collect();
    let retired = if retired.is_empty() { "none".to_owned() } else { retired.join(", ") };
    Record {
        org_id,
        project_id: None,
        action: action::PAYLOAD_KEYS_REWRAP,
        target: None,
        outcome: outcome::ALLOWED,
        detail: Some(format!(
            "re-sealed {total} payload values under key id {first} (from {}); key ids retired: {retired}",
            from.join(", ")
        )),
    }
}

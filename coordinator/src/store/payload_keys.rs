//! Where sealed values live, and which payload key ids may seal a retained
//! one (decision 0045). A key is retired by re-sealing its values under the
//! ring's first key (`crate::payload_keys`); here are the reads and the
//! compare-and-set writes that does, and the small table of key ids in use
//! that a coordinator checks its ring against at start.
//!
//! "Retained" is the readers' word: a value of a row whose
//! `retention_expires_at` has passed is read by no one and only waits to be
//! dropped, so it is neither re-sealed nor counted. Webhook endpoints have no
//! such end: their secrets are retained until the endpoint is deleted.

use super::{Dialect, Result, Store};
use crate::crypto::{Field, KeyRing};
use crate::domain::Millis;
use sqlx::{AssertSqlSafe, Row};
use std::collections::BTreeMap;
use std::sync::LazyLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeyType {
    Text,
    Int,
}

/// A table with sealed columns.
#[derive(Debug)]
pub struct SealedTable {
    pub(crate) name: &'static str,
    /// Its primary key, the order rows are paged in (so each page is read
    /// along the key's index, and an update names one partition).
    key: &'static [(&'static str, KeyType)],
    /// The column whose id each value's associated data binds.
    aad_id: &'static str,
    /// Whether rows end at `retention_expires_at`.
    expires: bool,
    pub(crate) columns: &'static [(&'static str, Field)],
}

/// Every sealed column there is. A new `*_ct` column belongs here, or a key
/// that sealed it could be retired while it still holds values.
pub const SEALED_TABLES: [SealedTable; 4] = [
    SealedTable {
        name: "executions",
        key: &[("id", KeyType::Text), ("retention_expires_at", KeyType::Int), ("org_id", KeyType::Text)],
        aad_id: "id",
        expires: true,
        columns: &[("input_ct", Field::Input), ("output_ct", Field::Output), ("error_detail_ct", Field::ErrorDetail)],
    },
    SealedTable {
        name: "attempts",
        key: &[
            ("execution_id", KeyType::Text),
            ("attempt", KeyType::Int),
            ("retention_expires_at", KeyType::Int),
            ("org_id", KeyType::Text),
        ],
        aad_id: "execution_id",
        expires: true,
        columns: &[("output_ct", Field::Output), ("error_detail_ct", Field::ErrorDetail)],
    },
    SealedTable {
        name: "input_requests",
        key: &[
            ("execution_id", KeyType::Text),
            ("request_key", KeyType::Text),
            ("retention_expires_at", KeyType::Int),
            ("org_id", KeyType::Text),
        ],
        aad_id: "execution_id",
        expires: true,
        columns: &[("spec_ct", Field::InputRequest), ("response_ct", Field::InputResponse)],
    },
    SealedTable {
        name: "webhook_endpoints",
        key: &[("id", KeyType::Text)],
        aad_id: "id",
        expires: false,
        columns: &[("secret_ct", Field::WebhookSecret), ("previous_secret_ct", Field::WebhookSecret)],
    },
];

#[derive(Clone, Debug, PartialEq, Eq)]
enum KeyValue {
    Text(String),
    Int(i64),
}

/// A row's primary key, as read (opaque: it only goes back to the store).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RowKey(Vec<KeyValue>);

/// A row holding values sealed by a key other than the sealing one.
#[derive(Clone, Debug)]
pub struct SealedRow {
    pub(crate) key: RowKey,
    pub(crate) org_id: String,
    /// The id the values' associated data binds.
    pub(crate) aad_id: String,
    /// (column, field, sealed value) of each such value.
    pub(crate) values: Vec<(&'static str, Field, Vec<u8>)>,
}

/// Sets `column` of the row to `new` if it still holds `old`.
#[derive(Clone, Debug)]
pub struct Replacement {
    pub(crate) key: RowKey,
    pub(crate) column: &'static str,
    pub(crate) old: Vec<u8>,
    pub(crate) new: Vec<u8>,
}

/// Retained values per key id; a value too short to name one is counted
/// under the empty id (no key has it).
pub type KeyCounts = BTreeMap<String, i64>;

/// Every byte value once, in order: SQLite has no `get_byte`, but the
/// position of a one-byte blob in this one is its value plus one.
static SQLITE_BYTES: LazyLock<String> = LazyLock::new(|| {
    let hex: String = (0..=255u8).map(|b| format!("{b:02X}")).collect();
    format!("X'{hex}'")
});

/// The key id bytes of the sealed value in `column` (layout in `crypto.rs`:
/// version, id length, id), NULL for a value too short to say.
fn key_id_sql(dialect: Dialect, column: &str) -> String {
    match dialect {
        Dialect::Postgres => {
            format!(
                "(CASE WHEN octet_length({column}) >= 2 THEN substring({column} FROM 3 FOR get_byte({column}, 1)) END)"
            )
        }
        Dialect::Sqlite => format!(
            "(CASE WHEN length({column}) >= 2 THEN substr({column}, 3, instr({}, substr({column}, 2, 1)) - 1) END)",
            SQLITE_BYTES.as_str()
        ),
    }
}

fn bind_key<'q>(
    mut q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    key: &RowKey,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    for v in &key.0 {
        q = match v {
            KeyValue::Text(s) => q.bind(s.clone()),
            KeyValue::Int(i) => q.bind(*i),
        };
    }
    q
}

impl Store {
    /// Retained values per key id, over every sealed column (a full read:
    /// for `baton admin payload-keys`, never on a request's path).
    pub(crate) async fn sealed_counts(&self, now: Millis) -> Result<KeyCounts> {
        let mut counts = KeyCounts::new();
        for t in &SEALED_TABLES {
            for (column, _) in t.columns {
                let retained = if t.expires { " AND retention_expires_at > $1" } else { "" };
                let sql = format!(
                    "SELECT {} AS key_id, COUNT(*) AS n FROM {} WHERE {column} IS NOT NULL{retained} GROUP BY 1",
                    key_id_sql(self.dialect, column),
                    t.name
                );
                let mut q = sqlx::query(AssertSqlSafe(sql));
                if t.expires {
                    q = q.bind(now);
                }
                for r in q.fetch_all(&self.pool).await? {
                    let id: Option<Vec<u8>> = r.try_get("key_id")?;
                    let n: i64 = r.try_get("n")?;
                    let id = id.map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
                    *counts.entry(id).or_default() += n;
                }
            }
        }
        Ok(counts)
    }

    /// Up to `limit` retained rows of `t` after `after` (in key order) with a
    /// value not sealed by `sealing_key_id`. A plain read: the write that
    /// follows checks each value is still the one read.
    pub(crate) async fn sealed_rows(
        &self,
        t: &SealedTable,
        after: Option<&RowKey>,
        sealing_key_id: &str,
        now: Millis,
        limit: u32,
    ) -> Result<Vec<SealedRow>> {
        let keys: Vec<&str> = t.key.iter().map(|(c, _)| *c).collect();
        let columns: Vec<&str> = t.columns.iter().map(|(c, _)| *c).collect();
        let other_key: Vec<String> = columns.iter().map(|c| format!("{} <> $1", key_id_sql(self.dialect, c))).collect();
        let mut clauses = vec![format!("({})", other_key.join(" OR "))];
        let mut n = 1;
        if t.expires {
            n += 1;
            clauses.push(format!("retention_expires_at > ${n}"));
        }
        if after.is_some() {
            let params: Vec<String> = (0..keys.len()).map(|i| format!("${}", n + 1 + i)).collect();
            clauses.push(format!("({}) > ({})", keys.join(", "), params.join(", ")));
        }
        let sql = format!(
            "SELECT {}, org_id AS row_org, {} AS row_aad, {} FROM {} WHERE {} ORDER BY {} LIMIT {limit}",
            keys.join(", "),
            t.aad_id,
            columns.join(", "),
            t.name,
            clauses.join(" AND "),
            keys.join(", ")
        );
        let mut q = sqlx::query(AssertSqlSafe(sql)).bind(sealing_key_id.as_bytes().to_vec());
        if t.expires {
            q = q.bind(now);
        }
        if let Some(after) = after {
            q = bind_key(q, after);
        }
        let mut rows = Vec::new();
        for r in q.fetch_all(&self.pool).await? {
            let mut key = Vec::with_capacity(t.key.len());
            for (c, ty) in t.key {
                key.push(match ty {
                    KeyType::Text => KeyValue::Text(r.try_get(*c)?),
                    KeyType::Int => KeyValue::Int(r.try_get(*c)?),
                });
            }
            let mut values = Vec::new();
            for (c, field) in t.columns {
                let v: Option<Vec<u8>> = r.try_get(*c)?;
                if let Some(v) = v.filter(|v| KeyRing::key_id_of(v) != Some(sealing_key_id)) {
                    values.push((*c, *field, v));
                }
            }
            rows.push(SealedRow {
                key: RowKey(key),
                org_id: r.try_get("row_org")?,
                aad_id: r.try_get("row_aad")?,
                values,
            });
        }
        Ok(rows)
    }

    /// Writes each replacement whose column still holds its `old` value, in
    /// one transaction; says which were written. A value a concurrent write
    /// changed meanwhile keeps what that write wrote.
    pub(crate) async fn replace_sealed(&self, t: &SealedTable, replacements: &[Replacement]) -> Result<Vec<bool>> {
        let key_match: Vec<String> = t.key.iter().enumerate().map(|(i, (c, _))| format!("{c} = ${}", i + 2)).collect();
        let mut tx = self.begin().await?;
        let mut written = Vec::with_capacity(replacements.len());
        for r in replacements {
            if !t.columns.iter().any(|(c, _)| *c == r.column) {
                return Err(super::Error::Corrupt(format!("{} has no sealed column {}", t.name, r.column)));
            }
            let sql = format!(
                "UPDATE {} SET {col} = $1 WHERE {} AND {col} = ${}",
                t.name,
                key_match.join(" AND "),
                t.key.len() + 2,
                col = r.column
            );
            let q = bind_key(sqlx::query(AssertSqlSafe(sql)).bind(r.new.clone()), &r.key).bind(r.old.clone());
            written.push(q.execute(&mut *tx).await?.rows_affected() == 1);
        }
        self.commit(tx).await?;
        Ok(written)
    }

    /// Notes that `key_id` seals values from now on (again: refreshed on every
    /// sweep pass while a coordinator seals with it).
    pub async fn note_payload_key(&self, key_id: &str, now: Millis) -> Result<()> {
        sqlx::query(
            "INSERT INTO payload_keys_in_use (key_id, noted_at) VALUES ($1, $2) \
             ON CONFLICT (key_id) DO UPDATE SET noted_at = excluded.noted_at",
        )
        .bind(key_id)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The key ids that may seal a retained value, with when each was last
    /// noted; the empty id stands for values not surveyed yet.
    pub(crate) async fn payload_keys_in_use(&self) -> Result<BTreeMap<String, Millis>> {
        let rows = sqlx::query("SELECT key_id, noted_at FROM payload_keys_in_use").fetch_all(&self.pool).await?;
        rows.iter().map(|r| Ok((r.try_get("key_id")?, r.try_get("noted_at")?))).collect()
    }

    /// Records the key ids a survey of the retained values found (as noted
    /// by no one: a value names them, no sealer does), and that the survey
    /// is done.
    pub(crate) async fn record_payload_key_survey(&self, found: &[&str]) -> Result<()> {
        let mut tx = self.begin().await?;
        for id in found.iter().filter(|id| !id.is_empty()) {
            sqlx::query(
                "INSERT INTO payload_keys_in_use (key_id, noted_at) VALUES ($1, 0) ON CONFLICT (key_id) DO NOTHING",
            )
            .bind(*id)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("DELETE FROM payload_keys_in_use WHERE key_id = ''").execute(&mut *tx).await?;
        self.commit(tx).await?;
        Ok(())
    }

    /// Forgets `key_id` unless it was noted at or after `noted_before` (a
    /// coordinator still sealing with it notes it on every sweep pass).
    pub(crate) async fn retire_payload_key(&self, key_id: &str, noted_before: Millis) -> Result<bool> {
        let done = sqlx::query("DELETE FROM payload_keys_in_use WHERE key_id = $1 AND noted_at < $2")
            .bind(key_id)
            .bind(noted_before)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

//! Reads that authenticate in the same round trip: the caller's credential
//! joined with the row the request is about. Every call still sees the
//! credential as committed (so a revocation holds at once), without paying a
//! second query for it.

use super::identity::{CREDENTIAL_COLUMNS, TOOL_COLUMNS, credential_from_row, tool_from_row};
use super::padding::PaddedTexts;
use super::records::{EXECUTION_COLUMNS, ExecutionRecord, execution_from_row};
use super::retention::RetentionSettings;
use super::{Credential, PADDED_UP_TO, Result, Store, ToolRecord, padded};
use crate::domain::ExecutionId;
use sqlx::{AssertSqlSafe, Row};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;

/// `columns` with every name qualified by `table`.
fn qualified(table: &str, columns: &str) -> String {
    columns.split(',').map(|c| format!("{table}.{}", c.trim())).collect::<Vec<_>>().join(", ")
}

static WITH_EXECUTION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {CREDENTIAL_COLUMNS}, {} FROM credentials c LEFT JOIN executions e ON e.id = $2 \
         WHERE c.token_hash = $1",
        qualified("e", EXECUTION_COLUMNS)
    )
});

static WITH_TOOL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {CREDENTIAL_COLUMNS}, {}, p.retention_ms AS project_retention_ms, \
         o.retention_ms AS org_retention_ms, o.execution_logging AS org_execution_logging \
         FROM credentials c LEFT JOIN tools t ON t.project_id = $2 AND t.name = $3 \
         LEFT JOIN projects p ON p.id = c.project_id LEFT JOIN organizations o ON o.id = p.org_id \
         WHERE c.token_hash = $1",
        qualified("t", TOOL_COLUMNS)
    )
});

impl Store {
    /// The credential with `token_hash` (None when unknown) and execution `id`
    /// (when one is asked for), if it exists.
    pub async fn credential_with_execution(
        &self,
        token_hash: &[u8],
        id: Option<&ExecutionId>,
    ) -> Result<Option<(Credential, Option<ExecutionRecord>)>> {
        let row = sqlx::query(AssertSqlSafe(Cow::Borrowed(WITH_EXECUTION.as_str())))
            .bind(token_hash)
            .bind(id.map(ExecutionId::as_str))
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let record = match row.try_get::<Option<String>, _>("id")? {
            Some(_) => Some(execution_from_row(&row)?),
            None => None,
        };
        Ok(Some((credential_from_row(&row)?, record)))
    }

    /// The credential with `token_hash` (None when unknown), tool `name` of
    /// `project_id` if registered, and the retention of the credential's project.
    pub(crate) async fn credential_with_tool(
        &self,
        token_hash: &[u8],
        project_id: &str,
        name: &str,
    ) -> Result<Option<WithTool>> {
        let row = sqlx::query(AssertSqlSafe(Cow::Borrowed(WITH_TOOL.as_str())))
            .bind(token_hash)
            .bind(project_id)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(with_tool_from_row).transpose()
    }

    /// [`Store::credential_with_tool`] for many starts in one statement
    /// (Postgres; SQLite answers one by one), answered in order.
    pub(crate) async fn credentials_with_tools(&self, asks: &[(&[u8], &str, &str)]) -> Result<Vec<Option<WithTool>>> {
        if self.dialect == super::Dialect::Sqlite || asks.len() < 2 {
            let mut out = Vec::with_capacity(asks.len());
            for (hash, project_id, name) in asks {
                out.push(self.credential_with_tool(hash, project_id, name).await?);
            }
            return Ok(out);
        }
        let rows = start_read(asks).fetch_all(&self.hot).await?;
        let mut out = vec![None; asks.len()];
        for row in &rows {
            let ask =
                usize::try_from(row.try_get::<i64, _>("ask")?).map_err(|_| super::Error::Corrupt("ask".into()))?;
            if let Some(slot) = out.get_mut(ask) {
                *slot = Some(with_tool_from_row(row)?);
            }
        }
        Ok(out)
    }
}

/// A credential, the tool asked for (if registered) and its project's retention.
pub(crate) type WithTool = (Credential, Option<ToolRecord>, RetentionSettings);

fn with_tool_from_row(row: &sqlx::any::AnyRow) -> Result<WithTool> {
    let tool = match row.try_get::<Option<String>, _>("name")? {
        Some(_) => Some(tool_from_row(row)?),
        None => None,
    };
    let retention = RetentionSettings {
        project_ms: row.try_get("project_retention_ms")?,
        organization_ms: row.try_get("org_retention_ms")?,
        execution_logging: row.try_get::<Option<i64>, _>("org_execution_logging")?.is_none_or(|on| on != 0),
    };
    Ok((credential_from_row(row)?, tool, retention))
}

/// What one coalesced read found: the credential asked for (when one was)
/// and the execution, each if it exists.
pub(super) type CredentialAndExecution = (Option<Credential>, Option<ExecutionRecord>);

impl Store {
    /// Many owner reads at once, answered in order: each ask is a token hash
    /// (or none) and an execution id (or none). One statement on
    /// Postgres; SQLite reads the credentials and the rows in one each.
    pub(crate) async fn credentials_with_executions(
        &self,
        asks: &[(Option<&[u8]>, Option<&ExecutionId>)],
    ) -> Result<Vec<CredentialAndExecution>> {
        if self.dialect == super::Dialect::Sqlite {
            if let [(Some(hash), id)] = asks {
                let found = self.credential_with_execution(hash, *id).await?;
                return Ok(vec![found.map(|(c, e)| (Some(c), e)).unwrap_or_default()]);
            }
            let mut hashes: Vec<&[u8]> = asks.iter().filter_map(|(h, _)| *h).collect();
            hashes.sort_unstable();
            hashes.dedup();
            let mut ids: Vec<&ExecutionId> = asks.iter().filter_map(|(_, id)| *id).collect();
            ids.sort_unstable();
            ids.dedup();
            let credentials = self.credentials_by_hashes(&hashes).await?;
            let executions = self.executions_by_ids(&ids).await?;
            return Ok(asks
                .iter()
                .map(|(h, id)| {
                    (h.and_then(|h| credentials.get(h).cloned()), id.and_then(|id| executions.get(id).cloned()))
                })
                .collect());
        }
        // The day partition of each row asked for, when this replica wrote them all.
        let days: Option<Vec<Option<i64>>> = asks
            .iter()
            .map(|(_, id)| match id {
                Some(id) => self.last_written.retention_of(id).map(Some),
                None => Some(None),
            })
            .collect();
        let rows = owner_read(asks, days.as_deref()).fetch_all(&self.hot).await?;
        let mut out: Vec<CredentialAndExecution> = vec![(None, None); asks.len()];
        for row in &rows {
            let ask =
                usize::try_from(row.try_get::<i64, _>("ask")?).map_err(|_| super::Error::Corrupt("ask".into()))?;
            let Some(slot) = out.get_mut(ask) else { continue };
            if row.try_get::<Option<String>, _>("cred_id")?.is_some() {
                slot.0 = Some(credential_from_row(row)?);
            }
            if row.try_get::<Option<String>, _>("id")?.is_some() {
                slot.1 = Some(execution_from_row(row)?);
            }
        }
        if days.is_some() {
            // A row re-dated since this replica wrote it is not in the day
            // named: those are read again in every day's partition.
            let missed: Vec<&ExecutionId> =
                asks.iter().zip(&out).filter_map(|((_, id), (_, found))| id.filter(|_| found.is_none())).collect();
            if !missed.is_empty() {
                let found = self.executions_by_ids(&missed).await?;
                for ((_, id), slot) in asks.iter().zip(out.iter_mut()) {
                    if let (Some(id), None) = (id, &slot.1) {
                        slot.1 = found.get(*id).cloned();
                    }
                }
            }
        }
        Ok(out)
    }

    /// Many credentials by token hash at once (for coalesced reads), keyed by hash.
    pub(crate) async fn credentials_by_hashes(&self, hashes: &[&[u8]]) -> Result<HashMap<Vec<u8>, Credential>> {
        if hashes.is_empty() {
            return Ok(HashMap::new());
        }
        let sql = format!(
            "SELECT c.token_hash AS cred_token_hash, {CREDENTIAL_COLUMNS} FROM credentials c WHERE c.token_hash IN ({})",
            placeholders(hashes.len())
        );
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for h in hashes {
            query = query.bind(*h);
        }
        let rows = query.persistent(false).fetch_all(&self.pool).await?;
        rows.iter().map(|r| Ok((r.try_get::<Vec<u8>, _>("cred_token_hash")?, credential_from_row(r)?))).collect()
    }

    /// Many executions by id at once (for coalesced reads), keyed by id.
    pub(crate) async fn executions_by_ids(
        &self,
        ids: &[&ExecutionId],
    ) -> Result<HashMap<ExecutionId, ExecutionRecord>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let sql = format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE id IN ({})", placeholders(ids.len()));
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for id in ids {
            query = query.bind(id.as_str());
        }
        let rows = query.persistent(false).fetch_all(&self.pool).await?;
        rows.iter().map(|r| execution_from_row(r).map(|e| (e.id.clone(), e))).collect()
    }
}

/// The statement that answers `asks` (see [`Store::credentials_with_tools`]),
/// padded to [`padded`] asks: a padding ask names no credential, so it joins
/// nothing.
pub(super) fn start_read(asks: &[(&[u8], &str, &str)]) -> AnyQuery {
    let n = padded(asks.len());
    let mut query = sqlx::query(START_READS.get(n, start_read_sql));
    for (hash, project_id, name) in asks {
        query = query.bind(Some(hash.to_vec())).bind(project_id.to_string()).bind(name.to_string());
    }
    for _ in asks.len()..n {
        query = query.bind(None::<Vec<u8>>).bind(String::new()).bind(String::new());
    }
    query.persistent(n <= PADDED_UP_TO)
}

/// Many starts' credential, tool and retention read, for `n` asks (each a
/// token hash, project and tool name).
fn start_read_sql(n: usize) -> String {
    let values: Vec<String> = (0..n)
        .map(|i| format!("(${}::bytea, ${}::text, ${}::text, {i}::bigint)", 3 * i + 1, 3 * i + 2, 3 * i + 3))
        .collect();
    format!(
        "SELECT q.i AS ask, {CREDENTIAL_COLUMNS}, {}, p.retention_ms AS project_retention_ms, \
         o.retention_ms AS org_retention_ms, o.execution_logging AS org_execution_logging \
         FROM (VALUES {}) AS q(h, project_id, name, i) JOIN credentials c ON c.token_hash = q.h \
         LEFT JOIN tools t ON t.project_id = q.project_id AND t.name = q.name \
         LEFT JOIN projects p ON p.id = c.project_id LEFT JOIN organizations o ON o.id = p.org_id",
        qualified("t", TOOL_COLUMNS),
        values.join(", ")
    )
}

static OWNER_READS: PaddedTexts = PaddedTexts::new();
static HINTED_OWNER_READS: PaddedTexts = PaddedTexts::new();
static START_READS: PaddedTexts = PaddedTexts::new();

type AnyQuery = sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments>;

/// The statement that answers `asks` (see [`Store::credentials_with_executions`]),
/// padded to [`padded`] asks: each padding ask names nothing, so its row finds
/// no credential and no execution, and its index is past every caller's.
pub(super) fn owner_read(asks: &[(Option<&[u8]>, Option<&ExecutionId>)], days: Option<&[Option<i64>]>) -> AnyQuery {
    let n = padded(asks.len());
    let texts = if days.is_some() { &HINTED_OWNER_READS } else { &OWNER_READS };
    let mut query = sqlx::query(texts.get(n, |n| owner_read_sql(n, days.is_some())));
    for (i, (hash, id)) in asks.iter().enumerate() {
        query = query.bind(hash.map(<[u8]>::to_vec)).bind(id.map(|id| id.as_str().to_owned()));
        if let Some(days) = days {
            query = query.bind(days.get(i).copied().flatten());
        }
    }
    for _ in asks.len()..n {
        query = query.bind(None::<Vec<u8>>).bind(None::<String>);
        if days.is_some() {
            query = query.bind(None::<i64>);
        }
    }
    query.persistent(n <= PADDED_UP_TO)
}

/// Many owner reads, for `n` asks (each a token hash and an execution id,
/// and with `hinted` the day partition the row was written to). With every
/// row's day known, each row is looked up in its day's partition alone;
/// otherwise in every day's.
fn owner_read_sql(n: usize, hinted: bool) -> String {
    let width = if hinted { 3 } else { 2 };
    let values: Vec<String> = (0..n)
        .map(|i| {
            let day = if hinted { format!(", ${}::bigint", width * i + 3) } else { String::new() };
            format!("(${}::bytea, ${}::text{day}, {i}::bigint)", width * i + 1, width * i + 2)
        })
        .collect();
    let (day_column, day_join) = if hinted { ("r, ", " AND e.retention_expires_at = q.r") } else { ("", "") };
    format!(
        "SELECT q.i AS ask, {CREDENTIAL_COLUMNS}, {} FROM (VALUES {}) AS q(h, id, {day_column}i) \
         LEFT JOIN credentials c ON c.token_hash = q.h LEFT JOIN executions e ON e.id = q.id{day_join}",
        qualified("e", EXECUTION_COLUMNS),
        values.join(", "),
    )
}

fn placeholders(n: usize) -> String {
    (1..=n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::Execute as _;

    #[test]
    fn reads_of_five_to_eight_asks_share_one_statement() {
        let ids: Vec<ExecutionId> = (0..8).map(|_| ExecutionId::generate()).collect();
        let hash = [7u8; 32];
        let reads: Vec<_> = ids.iter().map(|id| (Some(&hash[..]), Some(id))).collect();
        let days = [Some(1); 8];
        let owner =
            |n: usize, hinted: bool| owner_read(&reads[..n], hinted.then_some(&days[..n])).sql().as_str().to_owned();
        let starts: Vec<(&[u8], &str, &str)> = (0..8).map(|_| (&hash[..], "prj_1", "Demo.Echo")).collect();
        let start = |n: usize| start_read(&starts[..n]).sql().as_str().to_owned();
        for hinted in [false, true] {
            assert_eq!(owner(5, hinted), owner(8, hinted), "padded to eight asks, the text recurs and stays prepared");
            assert_ne!(owner(4, hinted), owner(5, hinted));
        }
        assert_eq!(start(5), start(8));
        assert_ne!(start(4), start(5));
    }
}

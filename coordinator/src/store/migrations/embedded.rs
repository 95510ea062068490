//! The migration files this binary carries, per backend, in version order.
//! A file's text is what sqlx's checksum in `_sqlx_migrations` is taken of, so
//! a file once released never changes; a schema change is a new file, listed
//! here and in the other backend's folder (tidy holds both folders to the
//! same tables and columns).

use super::super::Dialect;
use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType};

/// A migration whose text starts with this line runs statement by statement,
/// outside any transaction (sqlx's spelling for its own migration folders).
pub(super) const NO_TRANSACTION: &str = "-- no-transaction";

macro_rules! files {
    ($dir:literal; $($version:literal => $file:literal,)*) => {
        &[$(($version, $file, include_str!(concat!("../../../../migrations/", $dir, "/", $file, ".sql")))),*]
    };
}

/// (version, file stem, text).
type Files = &'static [(i64, &'static str, &'static str)];

const POSTGRES: Files = files!("postgres";
    1 => "0001_init",
    2 => "0002_tool_client_capabilities",
    3 => "0003_worker_bindings",
    4 => "0004_history",
    5 => "0005_audit_retention",
    6 => "0006_webhooks",
    7 => "0007_watch_tokens",
    8 => "0008_history_indexes",
    9 => "0009_tool_metadata",
    10 => "0010_history_counts",
    11 => "0011_admission_fence",
    12 => "0012_history_counts_by_hour",
    13 => "0013_admission_fence_lock",
    14 => "0014_audit_occurrences",
    15 => "0015_tool_owners",
    16 => "0016_dashboard_sessions",
    17 => "0017_change_cursor",
    18 => "0018_history_partitions",
    19 => "0019_audit_partitions",
    20 => "0020_org_keys",
    21 => "0021_payload_keys",
    22 => "0022_project_role_grants",
);

const SQLITE: Files = files!("sqlite";
    1 => "0001_init",
    2 => "0002_tool_client_capabilities",
    3 => "0003_worker_bindings",
    4 => "0004_history",
    5 => "0005_audit_retention",
    6 => "0006_webhooks",
    7 => "0007_watch_tokens",
    8 => "0008_history_indexes",
    9 => "0009_tool_metadata",
    10 => "0010_history_counts",
    11 => "0011_admission_fence",
    12 => "0012_history_counts_by_hour",
    14 => "0014_audit_occurrences",
    15 => "0015_tool_owners",
    16 => "0016_dashboard_sessions",
    17 => "0017_change_cursor",
    18 => "0018_history_partitions",
    19 => "0019_audit_partitions",
    20 => "0020_org_keys",
    21 => "0021_payload_keys",
    22 => "0022_project_role_grants",
);

fn files(dialect: Dialect) -> Files {
    match dialect {
        Dialect::Postgres => POSTGRES,
        Dialect::Sqlite => SQLITE,
    }
}

/// The migrations of `dialect`, named by their file stem after the number.
pub(super) fn migrations(dialect: Dialect) -> Vec<Migration> {
    files(dialect)
        .iter()
        .map(|(version, file, sql)| {
            let name = file.split_once('_').map_or(*file, |(_, name)| name);
            let no_tx = sql.starts_with(NO_TRANSACTION);
            Migration::new(*version, name.into(), MigrationType::Simple, (*sql).into_sql_str(), no_tx)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `.sql` file of the folder is embedded, under the number it bears.
    #[test]
    fn every_migration_file_is_embedded_under_its_number() {
        for (dialect, dir) in [(Dialect::Postgres, "postgres"), (Dialect::Sqlite, "sqlite")] {
            let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations").join(dir);
            let mut on_disk: Vec<String> = std::fs::read_dir(&folder)
                .expect("the migrations folder")
                .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".sql").map(str::to_owned))
                .collect();
            on_disk.sort();
            let embedded: Vec<String> = files(dialect).iter().map(|(_, f, _)| (*f).to_owned()).collect();
            assert_eq!(embedded, on_disk, "{dir}: embed every file, in order");
            for (version, file, _) in files(dialect) {
                assert_eq!(file.split_once('_').and_then(|(n, _)| n.parse().ok()), Some(*version), "{file}");
            }
        }
    }
}

//! A database of a bench's own, created beside the one `--database-url` names
//! (which is only used to create and drop it).

use anyhow::Context as _;
use sqlx::Connection as _;

pub(super) struct ScratchDatabase {
    pub name: String,
    pub url: String,
}

impl ScratchDatabase {
    /// Creates `baton_bench_<kind>_<time>_<random>` on `admin_url`'s server.
    pub(super) async fn create(admin_url: &str, kind: &str) -> anyhow::Result<ScratchDatabase> {
        let (server, query) = match admin_url.split_once('?') {
            Some((s, q)) => (s.to_owned(), format!("?{q}")),
            None => (admin_url.to_owned(), String::new()),
        };
        let (prefix, _) = server.rsplit_once('/').context("--database-url names no database")?;
        let mut suffix = [0u8; 3];
        getrandom::fill(&mut suffix).map_err(|e| anyhow::anyhow!("random name: {e}"))?;
        let secs = baton_proto::clock::unix_seconds();
        let name = format!("baton_bench_{kind}_{secs}_{:02x}{:02x}{:02x}", suffix[0], suffix[1], suffix[2]);
        let mut admin = sqlx::PgConnection::connect(admin_url).await.context("connecting to --database-url")?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut admin).await?;
        admin.close().await?;
        Ok(ScratchDatabase { url: format!("{prefix}/{name}{query}"), name })
    }

    pub(super) async fn drop_it(self, admin_url: &str) -> anyhow::Result<()> {
        let mut admin = sqlx::PgConnection::connect(admin_url).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE {} WITH (FORCE)", self.name)))
            .execute(&mut admin)
            .await?;
        Ok(())
    }
}

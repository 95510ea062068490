//! Servers a test owns and may stop or restart while a cluster uses them: a
//! private PostgreSQL (`initdb` and `pg_ctl` of the installed server, in a
//! temporary directory, on a free port) and a private `redis-server`. The
//! shared Postgres and Redis on the default ports are never touched here.

pub(crate) mod redis_cluster;

use crate::harness::eventually;
use anyhow::{Context as _, Result, anyhow, bail};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

/// A port nothing listens on right now.
pub(crate) fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The installed PostgreSQL's `bin` directory: `BATON_PG_BIN`, else the
/// directory of an `initdb` on `PATH` (where a link leads: a link beside
/// `initdb` need not bring `pg_basebackup`), else the newest
/// `/usr/lib/postgresql/*/bin`.
fn pg_bin_dir() -> Result<PathBuf> {
    if let Ok(dir) = std::env::var("BATON_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
                let initdb = std::fs::canonicalize(dir.join("initdb"))?;
                return Ok(initdb.parent().map_or(dir, Path::to_path_buf));
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .context("no initdb on PATH and no /usr/lib/postgresql; set BATON_PG_BIN")?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| anyhow!("no PostgreSQL under /usr/lib/postgresql"))
}

/// A PostgreSQL server of one test. `initdb` refuses to run as root, so as
/// root every server command runs as the `postgres` system user.
pub(crate) struct PrivatePostgres {
    bin: PathBuf,
    /// Owned by the user the server runs as; holds `data/`, the socket and the log.
    home: PathBuf,
    port: u16,
    run_as: Option<String>,
    pub log: PathBuf,
}

impl PrivatePostgres {
    pub(crate) async fn start(parent: &Path) -> Result<PrivatePostgres> {
        let pg = PrivatePostgres::at(parent.join("postgres"))?;
        let data = pg.data();
        let out = pg
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .output()
            .await?;
        if !out.status.success() {
            bail!("initdb failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        pg.pg_ctl(&["-o", &pg.options(), "start"]).await?;
        pg.wait_ready().await?;
        Ok(pg)
    }

    /// A server's home at `home` (not yet initialized), owned by the user the
    /// server will run as.
    fn at(home: PathBuf) -> Result<PrivatePostgres> {
        let bin = pg_bin_dir()?;
        std::fs::create_dir_all(&home)?;
        let root = std::fs::metadata("/proc/self")?.uid() == 0;
        let run_as = if root {
            let id = |flag: &str| -> Result<u32> {
                let out = std::process::Command::new("id").arg(flag).arg("postgres").output()?;
                if !out.status.success() {
                    bail!("running as root needs a `postgres` system user for initdb");
                }
                Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
            };
            std::os::unix::fs::chown(&home, Some(id("-u")?), Some(id("-g")?))?;
            Some("postgres".to_owned())
        } else {
            None
        };
        Ok(PrivatePostgres { bin, log: home.join("server.log"), home, port: free_port()?, run_as })
    }

    fn options(&self) -> String {
        format!("-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200", self.port, self.home.display())
    }

    /// A streaming replica of this server (`pg_basebackup -R`: it follows the
    /// primary's WAL and answers reads), on a port of its own.
    pub(crate) async fn start_replica(&self, parent: &Path) -> Result<PrivatePostgres> {
        let replica = PrivatePostgres::at(parent.join("postgres-replica"))?;
        let out = replica
            .command("pg_basebackup")
            .arg("-D")
            .arg(replica.data())
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-R", "-X", "stream"])
            .arg("--no-sync")
            .output()
            .await?;
        if !out.status.success() {
            bail!("pg_basebackup failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        replica.pg_ctl(&["-o", &replica.options(), "start"]).await?;
        replica.wait_ready().await?;
        Ok(replica)
    }

    /// `pg_ctl stop -m fast`: the server is gone once this returns.
    pub(crate) async fn stop(&self) -> Result<()> {
        self.pg_ctl(&["-m", "fast", "stop"]).await
    }

    /// Starts a stopped server again on its port.
    pub(crate) async fn start_again(&self) -> Result<()> {
        self.pg_ctl(&["-o", &self.options(), "start"]).await?;
        self.wait_ready().await
    }

    fn data(&self) -> PathBuf {
        self.home.join("data")
    }

    fn command(&self, program: &str) -> Command {
        let exe = self.bin.join(program);
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        // The server's user may not be allowed into the test's working directory.
        cmd.current_dir(&self.home).stdin(Stdio::null()).kill_on_drop(true);
        cmd
    }

    async fn pg_ctl(&self, args: &[&str]) -> Result<()> {
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(&self.log)
            .args(["-w", "-t", "60"])
            .args(args)
            .stdout(Stdio::piped())
            .output()
            .await?;
        if !out.status.success() {
            bail!(
                "pg_ctl {args:?} failed: {}{}; see {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                self.log.display()
            );
        }
        Ok(())
    }

    async fn wait_ready(&self) -> Result<()> {
        let url = self.url();
        eventually(Duration::from_secs(30), "private postgres", || {
            let url = url.clone();
            async move {
                use sqlx::Connection as _;
                Ok(sqlx::PgConnection::connect(&url).await.ok().map(|_| ()))
            }
        })
        .await
    }

    /// The admin URL (`postgres` database) for `Settings::postgres_url`.
    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// `pg_ctl restart -m fast`: every session is ended, the server shuts down
    /// cleanly and starts again on the same port.
    pub(crate) async fn restart_fast(&self) -> Result<()> {
        self.pg_ctl(&["-m", "fast", "restart"]).await?;
        self.wait_ready().await
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let exe = self.bin.join("pg_ctl");
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = std::process::Command::new("runuser");
                c.args(["-u", user, "--"]).arg(exe);
                c
            }
            None => std::process::Command::new(exe),
        };
        let data = self.data();
        cmd.current_dir(&self.home).arg("-D").arg(&data).args(["-m", "immediate", "-w", "-t", "30", "stop"]);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let _ = cmd.status();
        if std::env::var("BATON_KEEP_PG").is_err() {
            let _ = std::fs::remove_dir_all(&data);
        }
    }
}

/// A `redis-server` of one test. It writes nothing on its own: a snapshot is
/// taken only when the test asks, so a restart starts empty or from that
/// snapshot, as the test chooses.
pub(crate) struct PrivateRedis {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl PrivateRedis {
    pub(crate) async fn start() -> Result<PrivateRedis> {
        let port = free_port()?;
        let dir = std::env::temp_dir().join(format!("baton-redis-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let mut r = PrivateRedis { port, dir, child: None };
        r.spawn().await?;
        Ok(r)
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn snapshot_file(&self) -> PathBuf {
        self.dir.join("dump.rdb")
    }

    async fn spawn(&mut self) -> Result<()> {
        let dir = self.dir.to_str().ok_or_else(|| anyhow!("redis dir is not UTF-8"))?.to_owned();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--dir", &dir, "--dbfilename", "dump.rdb"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("redis-server")?;
        self.child = Some(child);
        let url = self.url();
        eventually(Duration::from_secs(10), "private redis", || {
            let url = url.clone();
            async move {
                let Ok(mut con) = redis::Client::open(url)?.get_multiplexed_async_connection().await else {
                    return Ok(None);
                };
                // Answering PING is not enough: a server loading a snapshot refuses commands.
                let pong: Result<String, _> = redis::cmd("PING").query_async(&mut con).await;
                Ok(pong.ok().map(|_| ()))
            }
        })
        .await
    }

    /// Writes a snapshot of everything the server holds now (SAVE).
    pub(crate) async fn snapshot(&self) -> Result<()> {
        let mut con = redis::Client::open(self.url())?.get_multiplexed_async_connection().await?;
        let _: () = redis::cmd("SAVE").query_async(&mut con).await?;
        Ok(())
    }

    /// SIGKILL; the server is gone once this returns.
    pub(crate) async fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// A fresh (empty) server on the same port, after `kill9`.
    pub(crate) async fn start_again(&mut self) -> Result<()> {
        self.kill9().await;
        match std::fs::remove_file(self.snapshot_file()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        self.spawn().await
    }

    /// kill -9, then a server on the same port that loads the last
    /// `snapshot`: whatever was written after it is lost, the rest is back.
    pub(crate) async fn restart_from_snapshot(&mut self) -> Result<()> {
        self.kill9().await;
        if !self.snapshot_file().is_file() {
            bail!("no snapshot to restart from");
        }
        self.spawn().await
    }
}

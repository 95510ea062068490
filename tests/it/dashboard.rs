//! The dashboard's sign-in and session through real processes: who gets in
//! (admin and member keys of the project), who is refused with a page saying
//! why (read-only keys, end-user and worker tokens, another project's keys,
//! unknown or revoked keys), that a key revoked after sign-in ends the session
//! on the next request, that state-changing requests need the session's CSRF
//! token, and that payloads and cancel go through the coordinator's checks.
//! The browser's view of the same pages: scripts/checks/dashboard.sh.

use crate::harness::{Cluster, Settings};
use anyhow::{Context as _, Result, anyhow};
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};
use std::time::Duration;

/// A browser's view of one answer.
pub(crate) struct Page {
    pub(crate) status: u16,
    pub(crate) location: String,
    pub(crate) cookies: Vec<String>,
    pub(crate) body: String,
}

pub(crate) struct Browser {
    http: reqwest::Client,
    /// `http://gateway/dashboard/orgs/{org}/projects/{project}`
    base: String,
    pub(crate) session: Option<String>,
}

impl Browser {
    pub(crate) fn new(c: &Cluster, project: &str) -> Result<Browser> {
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build()?;
        let base = format!("http://{}/dashboard/orgs/{}/projects/{project}", c.gateways[0].addr, c.id.org_id);
        Ok(Browser { http, base, session: None })
    }

    async fn read(response: reqwest::Response) -> Result<Page> {
        let status = response.status().as_u16();
        let header = |name| response.headers().get(name).and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok());
        let location = header(LOCATION).unwrap_or_default().to_owned();
        let cookies =
            response.headers().get_all(SET_COOKIE).iter().filter_map(|v| v.to_str().ok().map(str::to_owned)).collect();
        Ok(Page { status, location, cookies, body: response.text().await? })
    }

    pub(crate) async fn get(&self, path: &str) -> Result<Page> {
        let mut req = self.http.get(format!("{}{path}", self.base));
        if let Some(s) = &self.session {
            req = req.header(COOKIE, format!("baton_dashboard={s}"));
        }
        Self::read(req.send().await?).await
    }

    pub(crate) async fn post(&self, path: &str, form: &[(&str, &str)], accept_json: bool) -> Result<Page> {
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_body(form));
        if let Some(s) = &self.session {
            req = req.header(COOKIE, format!("baton_dashboard={s}"));
        }
        if accept_json {
            req = req.header("accept", "application/json");
        }
        Self::read(req.send().await?).await
    }

    /// Pastes `key` into the sign-in form; keeps the session cookie it answers with.
    pub(crate) async fn sign_in(&mut self, key: &str) -> Result<Page> {
        let form = self.get("/sign-in").await?;
        let token = cookie_value(&form.cookies, "baton_dashboard_sign_in").context("sign-in cookie")?;
        let response = self
            .http
            .post(format!("{}/sign-in", self.base))
            .header(COOKIE, format!("baton_dashboard_sign_in={token}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_body(&[("key", key), ("csrf", token.as_str()), ("next", "")]))
            .send()
            .await?;
        let page = Self::read(response).await?;
        if let Some(session) = cookie_value(&page.cookies, "baton_dashboard").filter(|v| !v.is_empty()) {
            self.session = Some(session);
        }
        Ok(page)
    }

    /// The CSRF token the signed-in pages carry.
    pub(crate) async fn csrf(&self) -> Result<String> {
        let page = self.get("/tool-executions").await?;
        let marker = r#"<meta name="baton-csrf" content=""#;
        let start = page.body.find(marker).context("csrf meta")? + marker.len();
        page.body[start..].split('"').next().map(str::to_owned).ok_or_else(|| anyhow!("csrf"))
    }
}

/// `application/x-www-form-urlencoded`, as a browser sends a form.
fn form_body(pairs: &[(&str, &str)]) -> String {
    let encode = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    pairs.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect::<Vec<_>>().join("&")
}

fn cookie_value(set_cookies: &[String], name: &str) -> Option<String> {
    set_cookies.iter().find_map(|c| {
        let (n, rest) = c.split_once('=')?;
        (n == name).then(|| rest.split(';').next().unwrap_or_default().to_owned())
    })
}

pub(crate) async fn key(c: &Cluster, project: &str, role: &str, permissions: Option<&str>) -> Result<(String, String)> {
    let mut args = vec!["create-api-key", "--project", project, "--role", role];
    if let Some(p) = permissions {
        args.extend(["--permissions", p]);
    }
    let made = c.admin(&args).await?;
    let field = |f: &str| made[f].as_str().map(str::to_owned).ok_or_else(|| anyhow!("no {f} in {made}"));
    Ok((field("id")?, field("token")?))
}

#[tokio::test]
async fn dashboard_sign_in_admits_project_keys_and_refuses_everyone_else() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let project = c.id.project_id.clone();

    // Admin and member keys get a sealed, HttpOnly, SameSite=Strict session without the key in sight.
    for (who, token) in [("admin", &c.id.admin_key), ("member", &c.id.member_key)] {
        let mut b = Browser::new(&c, &project).expect("browser");
        let page = b.sign_in(token).await.expect("sign in");
        assert_eq!(page.status, 303, "{who}: {}", page.body);
        assert!(page.location.ends_with("/tool-executions"), "{who}: {}", page.location);
        let cookie = page.cookies.iter().find(|c| c.starts_with("baton_dashboard=")).expect("session cookie");
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
        assert!(!cookie.contains(token.as_str()), "{who}: the key is sealed, not readable");
        let list = b.get("/tool-executions").await.expect("list");
        assert_eq!(list.status, 200, "{who}: {}", list.body);
        assert!(list.body.contains(&format!("<strong>{who}</strong> key")), "{who}");
        assert_eq!(list.body.contains(">Audit log</a>"), who == "admin", "{who}: the audit log is linked for admins");
    }

    // Everyone else gets a page saying why, and no session.
    let (_, foreign) = {
        let other = c.admin(&["create-project", "--org", &c.id.org_id, "--name", "elsewhere"]).await.expect("project");
        key(&c, other["id"].as_str().expect("id"), "admin", None).await.expect("key")
    };
    let (revoked_id, revoked) = key(&c, &project, "admin", None).await.expect("key");
    c.admin(&["revoke", "--id", &revoked_id]).await.expect("revoke");
    let refused = [
        ("read-only key", c.id.read_only_key.as_str(), 403, "Read-only keys cannot open the dashboard"),
        ("end-user token", c.id.user_token.as_str(), 403, "End-user tokens cannot open the dashboard"),
        ("worker token", c.id.worker_token.as_str(), 403, "Worker tokens cannot open the dashboard"),
        ("another project's key", foreign.as_str(), 403, "This key belongs to another project"),
        ("revoked key", revoked.as_str(), 401, "Baton does not recognise this key"),
        ("made-up key", "bk_made-up", 401, "Baton does not recognise this key"),
    ];
    for (who, token, status, says) in refused {
        let mut b = Browser::new(&c, &project).expect("browser");
        let page = b.sign_in(token).await.expect("sign in");
        assert_eq!(page.status, status, "{who}: {}", page.body);
        assert!(page.body.contains(says), "{who}: {}", page.body);
        assert!(b.session.is_none(), "{who} got no session");
        assert!(page.body.starts_with("<!doctype html>"), "{who}: a page for people");
    }
}

#[tokio::test]
async fn dashboard_sessions_end_with_their_key_and_guard_every_change() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let project = c.id.project_id.clone();
    let (admin_id, admin_key) = key(&c, &project, "admin", None).await.expect("key");
    let mut admin = Browser::new(&c, &project).expect("browser");
    assert_eq!(admin.sign_in(&admin_key).await.expect("sign in").status, 303);
    let mut member = Browser::new(&c, &project).expect("browser");
    assert_eq!(member.sign_in(&c.id.member_key).await.expect("sign in").status, 303);
    let (_, operator_key) = key(&c, &project, "member", Some("status,cancel")).await.expect("key");
    let mut operator = Browser::new(&c, &project).expect("browser");
    assert_eq!(operator.sign_in(&operator_key).await.expect("sign in").status, 303);

    let rest = c.rest(0, &c.id.admin_key);
    let echo = rest.start("Demo.Echo", json!({"text": "canary-dash-1"}), None).await.expect("start").json();
    let echo = echo["execution_id"].as_str().expect("id").to_owned();
    rest.until_terminal(&echo, Duration::from_secs(30)).await.expect("done");
    let sleeper = rest.start("Demo.Sleep", json!({"seconds": 300}), None).await.expect("start").json();
    let sleeper = sleeper["execution_id"].as_str().expect("id").to_owned();

    // The session cookie of one project opens nothing in another.
    let mut elsewhere = Browser::new(&c, "prj_other").expect("browser");
    elsewhere.session = admin.session.clone();
    let page = elsewhere.get("/tool-executions").await.expect("get");
    assert_eq!(page.status, 303);
    assert!(page.location.contains("/projects/prj_other/sign-in"), "{}", page.location);

    // Payloads: fetched only by a POST carrying the token; members are refused by the coordinator.
    let reveal = format!("/tool-executions/{echo}/reveal");
    let page = admin.post(&reveal, &[("csrf", "forged"), ("part", "inputs")], true).await.expect("post");
    assert_eq!(page.status, 403, "{}", page.body);
    assert!(!page.body.contains("canary-dash-1"));
    let csrf = admin.csrf().await.expect("csrf");
    let page = admin.post(&reveal, &[("csrf", &csrf), ("part", "inputs")], true).await.expect("post");
    assert_eq!(page.status, 200, "{}", page.body);
    let revealed: Value = serde_json::from_str(&page.body).expect("json");
    assert_eq!(revealed["input"]["text"], "canary-dash-1");
    let member_csrf = member.csrf().await.expect("csrf");
    let page = member.post(&reveal, &[("csrf", &member_csrf), ("part", "inputs")], true).await.expect("post");
    assert_eq!(page.status, 403, "{}", page.body);
    assert!(!page.body.contains("canary-dash-1"));
    let detail = member.get(&format!("/tool-executions/{echo}")).await.expect("detail");
    assert!(!detail.body.contains("canary-dash-1"), "the panel never carries a payload");
    assert!(detail.body.contains("takes a project admin key"), "the member is told why the toggles are off");

    // The audit log names who revealed (the admin's key, by id); a member is refused with a page saying why.
    let audit = admin.get("/audit-log?action=history.reveal").await.expect("audit");
    assert_eq!(audit.status, 200, "{}", audit.body);
    assert!(audit.body.contains(&format!("<code>{admin_id}</code>")), "{}", audit.body);
    assert!(audit.body.contains("outcome-ok") && audit.body.contains("outcome-bad"), "allowed and refused reveals");
    let refused = member.get("/audit-log").await.expect("audit");
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("The audit log is for project admins"), "{}", refused.body);
    assert!(!refused.body.contains("history.reveal"), "no row reaches a member");

    // Cancel: the token first, then the coordinator's permission check.
    let cancel = format!("/tool-executions/{sleeper}/cancel");
    let operator_csrf = operator.csrf().await.expect("csrf");
    let page = operator.post(&cancel, &[("csrf", "forged")], true).await.expect("post");
    assert_eq!(page.status, 403, "{}", page.body);
    let page = member.post(&cancel, &[("csrf", &member_csrf)], true).await.expect("post");
    assert_eq!(page.status, 403, "a member without the permission: {}", page.body);
    let status = rest.get(&format!("/tool-executions/{sleeper}")).await.expect("get").json();
    assert_ne!(status["status"], "cancelled", "nothing was cancelled yet");
    let page = operator.post(&cancel, &[("csrf", &operator_csrf)], true).await.expect("post");
    assert_eq!(page.status, 200, "{}", page.body);
    let answer: Value = serde_json::from_str(&page.body).expect("json");
    assert!(
        ["accepted", "stop_delivery_unknown"].contains(&answer["outcome"].as_str().unwrap_or_default()),
        "{answer}"
    );
    let done = rest.until_terminal(&sleeper, Duration::from_secs(30)).await.expect("terminal");
    assert_eq!(done["status"], "cancelled");

    // Revoking the key ends its session on the next request.
    assert_eq!(admin.get("/tool-executions").await.expect("list").status, 200);
    c.admin(&["revoke", "--id", &admin_id]).await.expect("revoke");
    let page = admin.get("/tool-executions").await.expect("list");
    assert_eq!(page.status, 303);
    assert!(page.location.contains("/sign-in?") && page.location.ends_with("&ended=1"), "{}", page.location);
    assert!(page.cookies.iter().any(|c| c.starts_with("baton_dashboard=;") && c.contains("Max-Age=0")));
    let poll = admin.get("/tool-executions/live").await.expect("live");
    assert_eq!(poll.status, 401, "the script's polls end too: {}", poll.body);
    let audit = admin.get("/audit-log").await.expect("audit");
    assert_eq!(audit.status, 303, "the revoked key's session reads no audit log");

    // Signing out needs the token too, and clears the cookie.
    let page = member.post("/sign-out", &[("csrf", "forged")], false).await.expect("post");
    assert_eq!(page.status, 403);
    let page = member.post("/sign-out", &[("csrf", &member_csrf)], false).await.expect("post");
    assert_eq!(page.status, 303);
    assert!(page.cookies.iter().any(|c| c.starts_with("baton_dashboard=;")));
}

//! The `dashboard_sign_in` section (decision 0050): how people sign in to the
//! dashboard. `api_key` turns pasting a project API key on or off; `oidc`
//! configures the organization's OpenID provider. The coordinators use the
//! provider (they exchange codes and validate ID tokens); the gateways only
//! learn whether it is on. The client secret comes from `client_secret_file`
//! or from `BATON_DASHBOARD_SIGN_IN__OIDC__CLIENT_SECRET`, and is never shown.

use super::{Error, field};
use serde::Deserialize;
use std::path::PathBuf;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct SignInSection {
    /// People may sign in by pasting a project API key (admin or member).
    pub api_key: bool,
    /// The OpenID provider, if people sign in with it.
    pub oidc: Option<OidcSection>,
}

impl Default for SignInSection {
    fn default() -> Self {
        SignInSection { api_key: true, oidc: None }
    }
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OidcSection {
    /// The issuer; `{issuer_url}/.well-known/openid-configuration` is read.
    pub issuer_url: String,
    pub client_id: String,
    /// Prefer `client_secret_file`, or the environment variable.
    #[serde(default)]
    pub client_secret: Option<String>,
    #[serde(default)]
    pub client_secret_file: Option<PathBuf>,
    /// The gateway's public callback, as registered with the provider:
    /// `https://baton.example.com/dashboard/oidc/callback`.
    pub redirect_url: String,
    /// Requested besides `openid`.
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    #[serde(default = "default_email_claim")]
    pub email_claim: String,
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// Where the provider sends the browser after signing the person out there
    /// too (registered with it as a post-logout redirect URI).
    #[serde(default)]
    pub post_logout_redirect_url: Option<String>,
}

fn default_scopes() -> Vec<String> {
    vec!["email".into(), "profile".into()]
}
fn default_email_claim() -> String {
    "email".into()
}
fn default_groups_claim() -> String {
    "groups".into()
}

impl std::fmt::Debug for OidcSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcSection")
            .field("issuer_url", &self.issuer_url)
            .field("client_id", &self.client_id)
            .field("client_secret", &if self.client_secret.is_some() { "<redacted>" } else { "<unset>" })
            .field("client_secret_file", &self.client_secret_file)
            .field("redirect_url", &self.redirect_url)
            .field("scopes", &self.scopes)
            .field("email_claim", &self.email_claim)
            .field("groups_claim", &self.groups_claim)
            .field("post_logout_redirect_url", &self.post_logout_redirect_url)
            .finish()
    }
}

impl SignInSection {
    pub(crate) fn validate(&self) -> Result<(), Error> {
        let Some(o) = &self.oidc else {
            if !self.api_key {
                return Err(field("dashboard_sign_in.api_key", "cannot be off without dashboard_sign_in.oidc"));
            }
            return Ok(());
        };
        for (name, value) in [
            ("dashboard_sign_in.oidc.issuer_url", &o.issuer_url),
            ("dashboard_sign_in.oidc.redirect_url", &o.redirect_url),
        ] {
            if !(value.starts_with("https://") || value.starts_with("http://")) {
                return Err(field(name, "must be an http(s) URL"));
            }
        }
        if o.client_id.trim().is_empty() {
            return Err(field("dashboard_sign_in.oidc.client_id", "must not be empty"));
        }
        if o.client_secret.is_some() == o.client_secret_file.is_some() {
            return Err(field(
                "dashboard_sign_in.oidc.client_secret",
                "set exactly one of client_secret (environment) and client_secret_file",
            ));
        }
        Ok(())
    }

    /// The provider's options for a coordinator: the secret read from its file.
    pub(crate) fn provider(&self) -> Result<Option<baton_coordinator::oidc::ProviderOptions>, Error> {
        let Some(o) = &self.oidc else { return Ok(None) };
        let client_secret = match (&o.client_secret, &o.client_secret_file) {
            (Some(s), _) => s.clone(),
            (None, Some(path)) => std::fs::read_to_string(path)
                .map_err(|e| field("dashboard_sign_in.oidc.client_secret_file", format!("cannot be read: {e}")))?
                .trim()
                .to_owned(),
            (None, None) => return Err(field("dashboard_sign_in.oidc.client_secret", "is required")),
        };
        Ok(Some(baton_coordinator::oidc::ProviderOptions {
            issuer_url: o.issuer_url.clone(),
            client_id: o.client_id.clone(),
            client_secret,
            redirect_url: o.redirect_url.clone(),
            scopes: o.scopes.clone(),
            email_claim: o.email_claim.clone(),
            groups_claim: o.groups_claim.clone(),
            post_logout_redirect_url: o.post_logout_redirect_url.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;

    fn load(yaml: &str, env: &[(&str, &str)]) -> Result<Config, super::Error> {
        let dir = std::env::temp_dir().join(format!("baton-sign-in-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join(format!("c{}.yaml", yaml.len()));
        std::fs::write(&path, yaml).expect("write");
        let vars = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect::<Vec<_>>();
        Config::load_with(Some(&path), vars.into_iter())
    }

    const OIDC: &str = "dashboard_sign_in:\n  api_key: false\n  oidc:\n    issuer_url: http://127.0.0.1:9/\n    \
                        client_id: baton\n    redirect_url: http://127.0.0.1:8080/dashboard/oidc/callback\n";

    #[test]
    fn the_provider_is_configured_and_its_secret_never_shown() {
        assert!(Config::default().dashboard_sign_in.api_key, "API-key sign-in is on by default");
        let env = [("BATON_DASHBOARD_SIGN_IN__OIDC__CLIENT_SECRET", "very-secret-value")];
        let c = load(OIDC, &env).expect("config");
        assert!(!c.dashboard_sign_in.api_key);
        let p = c.dashboard_sign_in.provider().expect("provider").expect("configured");
        assert_eq!(
            (p.client_secret.as_str(), p.scopes.len(), p.groups_claim.as_str()),
            ("very-secret-value", 2, "groups")
        );
        assert!(!format!("{c:?} {p:?}").contains("very-secret"), "the secret is never in Debug output");
        let no_secret = load(OIDC, &[]).expect_err("a secret is required");
        assert!(no_secret.to_string().contains("client_secret"), "{no_secret}");
        let off = load("dashboard_sign_in:\n  api_key: false\n", &[]).expect_err("no way to sign in");
        assert!(off.to_string().contains("api_key"), "{off}");
    }
}

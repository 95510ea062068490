//! Signing people in with the organization's OpenID provider (decision 0050):
//! the authorization code flow with PKCE, `state` and `nonce`. The coordinator,
//! which owns authorization, holds the provider's configuration (and the
//! client secret) and does every step that needs trust: it builds the
//! authorization URL, exchanges the code, and validates the ID token's
//! signature against the provider's published keys, its issuer, audience,
//! expiry and nonce. The gateway only carries the browser through: it keeps
//! `state`, `nonce` and the PKCE verifier in a sealed, short-lived cookie and
//! checks `state` on the way back. The provider's metadata and keys are
//! fetched at every sign-in's start (so a provider that is down is told
//! before the browser goes there), and again when a token names a key they
//! lack (key rotation).

use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreIdToken};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, HttpRequest, HttpResponse, IssuerUrl, LogoutRequest, Nonce,
    PkceCodeChallenge, PkceCodeVerifier, PostLogoutRedirectUrl, ProviderMetadataWithLogout, RedirectUrl,
    RequestTokenError, Scope, TokenResponse,
};

/// The provider's discovery document, with the end-session endpoint of
/// RP-initiated logout when the provider has one.
pub type Metadata = ProviderMetadataWithLogout;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::RwLock;

/// Metadata and keys older than this are fetched again before use.
const METADATA_TTL: Duration = Duration::from_secs(3600);
/// No answer from the provider larger than this is read.
const MAX_RESPONSE_BYTES: usize = 1 << 20;
/// The groups kept of a person (each is a bound parameter of the grants' read),
/// and the longest group name and email address kept.
const MAX_GROUPS: usize = 256;
const MAX_NAME_LEN: usize = 320;

/// The provider's configuration. The client secret never appears in `Debug`.
#[derive(Clone)]
pub struct ProviderOptions {
    /// The issuer (`https://accounts.example.com`); discovery reads
    /// `{issuer}/.well-known/openid-configuration`.
    pub issuer_url: String,
    pub client_id: String,
    pub client_secret: String,
    /// The gateway's callback as registered with the provider:
    /// `https://baton.example.com/dashboard/oidc/callback`.
    pub redirect_url: String,
    /// Requested besides `openid` (e.g. `email`, `profile`, `groups`).
    pub scopes: Vec<String>,
    /// The claim holding the person's email address.
    pub email_claim: String,
    /// The claim holding the person's groups (an array of strings, or one string).
    pub groups_claim: String,
    /// Where the provider sends the browser after signing the person out
    /// there (registered with it); `None` leaves them on the provider's page.
    pub post_logout_redirect_url: Option<String>,
}

impl std::fmt::Debug for ProviderOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderOptions")
            .field("issuer_url", &self.issuer_url)
            .field("client_id", &self.client_id)
            .field("redirect_url", &self.redirect_url)
            .field("scopes", &self.scopes)
            .field("email_claim", &self.email_claim)
            .field("groups_claim", &self.groups_claim)
            .field("post_logout_redirect_url", &self.post_logout_redirect_url)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The provider could not be reached or answered nonsense (discovery,
    /// keys, or the token endpoint): try again later.
    #[error("the identity provider is unavailable: {0}")]
    Unavailable(String),
    /// The provider refused the code: unknown, expired, or already used.
    #[error("the identity provider refused the sign-in: {0}")]
    Refused(String),
    /// The ID token failed validation (signature, issuer, audience, expiry, nonce).
    #[error("the ID token is not valid: {0}")]
    InvalidToken(String),
    /// The token carries no (verified) email address.
    #[error("the identity provider named no verified email address")]
    NoEmail,
    #[error("the OpenID provider is misconfigured: {0}")]
    Config(String),
}

/// What the gateway keeps in the browser's flow cookie, and where to send it.
#[derive(Debug)]
pub struct Begun {
    pub authorize_url: String,
    pub state: String,
    pub nonce: String,
    pub pkce_verifier: String,
}

/// A person the provider vouched for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Person {
    pub subject: String,
    /// Lowercased.
    pub email: String,
    pub groups: Vec<String>,
}

struct Cached {
    metadata: Metadata,
    fetched: Instant,
}

/// A configured provider, its metadata and keys cached.
pub struct Provider {
    options: ProviderOptions,
    http: reqwest::Client,
    cached: RwLock<Option<Arc<Cached>>>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider").field("options", &self.options).finish_non_exhaustive()
    }
}

/// Sends one of the library's requests with reqwest (no redirects: a
/// redirect to an internal address would be a request forgery).
async fn send(http: &reqwest::Client, request: HttpRequest) -> Result<HttpResponse, Error> {
    let (parts, body) = request.into_parts();
    let response = http
        .request(parts.method, parts.uri.to_string())
        .headers(parts.headers)
        .body(body)
        .send()
        .await
        .map_err(|e| Error::Unavailable(e.without_url().to_string()))?;
    let status = response.status();
    let headers = response.headers().clone();
    if response.content_length().is_some_and(|n| n > MAX_RESPONSE_BYTES as u64) {
        return Err(Error::Unavailable("the answer is too large".into()));
    }
    let bytes = response.bytes().await.map_err(|e| Error::Unavailable(e.without_url().to_string()))?;
    if bytes.len() > MAX_RESPONSE_BYTES {
        return Err(Error::Unavailable("the answer is too large".into()));
    }
    let mut out = openidconnect::http::Response::new(bytes.to_vec());
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    Ok(out)
}

/// The library's HTTP client: reqwest, boxed into a `Send` future so the
/// gRPC handlers that await it stay `Send`.
struct Http<'a>(&'a reqwest::Client);

impl<'c> openidconnect::AsyncHttpClient<'c> for Http<'_> {
    type Error = Error;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = Result<HttpResponse, Error>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(send(self.0, request))
    }
}

impl Provider {
    pub fn new(options: ProviderOptions) -> Result<Provider, Error> {
        IssuerUrl::new(options.issuer_url.clone()).map_err(|e| Error::Config(format!("issuer_url: {e}")))?;
        RedirectUrl::new(options.redirect_url.clone()).map_err(|e| Error::Config(format!("redirect_url: {e}")))?;
        if options.client_id.is_empty() {
            return Err(Error::Config("client_id is empty".into()));
        }
        // reqwest needs a process-wide rustls provider (see webhooks/deliver.rs).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent("Baton-OIDC/1")
            .build()
            .map_err(|e| Error::Config(format!("HTTP client: {e}")))?;
        Ok(Provider { options, http, cached: RwLock::new(None) })
    }

    pub fn options(&self) -> &ProviderOptions {
        &self.options
    }

    /// The provider's metadata and keys: cached, or fetched when `refresh`,
    /// when none are cached, or when they are old.
    async fn metadata(&self, refresh: bool) -> Result<Arc<Cached>, Error> {
        if !refresh
            && let Some(c) = self.cached.read().await.as_ref()
            && c.fetched.elapsed() < METADATA_TTL
        {
            return Ok(c.clone());
        }
        let issuer = IssuerUrl::new(self.options.issuer_url.clone()).map_err(|e| Error::Config(e.to_string()))?;
        let http = Http(&self.http);
        let metadata = Metadata::discover_async(issuer, &http)
            .await
            .map_err(|e| Error::Unavailable(format!("discovery: {}", baton_proto::error::with_sources(&e))))?;
        let fresh = Arc::new(Cached { metadata, fetched: Instant::now() });
        *self.cached.write().await = Some(fresh.clone());
        Ok(fresh)
    }

    fn client(
        &self,
        metadata: &Metadata,
    ) -> Result<
        CoreClient<
            openidconnect::EndpointSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointMaybeSet,
            openidconnect::EndpointMaybeSet,
        >,
        Error,
    > {
        let redirect = RedirectUrl::new(self.options.redirect_url.clone()).map_err(|e| Error::Config(e.to_string()))?;
        Ok(CoreClient::from_provider_metadata(
            metadata.clone(),
            ClientId::new(self.options.client_id.clone()),
            Some(ClientSecret::new(self.options.client_secret.clone())),
        )
        .set_redirect_uri(redirect))
    }

    /// The authorization URL for a new sign-in, with fresh state, nonce and
    /// PKCE verifier. The metadata is fetched afresh: a provider that is down
    /// is told at once, not after the browser was sent to it.
    pub async fn begin(&self) -> Result<Begun, Error> {
        let cached = self.metadata(true).await?;
        let client = self.client(&cached.metadata)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request =
            client.authorize_url(CoreAuthenticationFlow::AuthorizationCode, CsrfToken::new_random, Nonce::new_random);
        for scope in &self.options.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.set_pkce_challenge(challenge).url();
        Ok(Begun {
            authorize_url: url.to_string(),
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
        })
    }

    /// Where to send a person's browser to end their session at the provider
    /// too (RP-initiated logout), if the provider offers it. Uses the cached
    /// metadata, or fetches it; a provider that cannot be reached is skipped
    /// (the session here is over either way).
    pub async fn logout_url(&self) -> Option<String> {
        let cached = match self.metadata(false).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "cannot end a session at the identity provider");
                return None;
            }
        };
        let endpoint = cached.metadata.additional_metadata().end_session_endpoint.clone()?;
        let mut request = LogoutRequest::from(endpoint).set_client_id(ClientId::new(self.options.client_id.clone()));
        if let Some(url) = &self.options.post_logout_redirect_url
            && let Ok(url) = PostLogoutRedirectUrl::new(url.clone())
        {
            request = request.set_post_logout_redirect_uri(url);
        }
        Some(request.http_get_url().to_string())
    }

    /// Exchanges `code` and validates the ID token it brings.
    pub async fn complete(&self, code: &str, pkce_verifier: &str, nonce: &str) -> Result<Person, Error> {
        let cached = self.metadata(false).await?;
        let client = self.client(&cached.metadata)?;
        let http = Http(&self.http);
        let response = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|e| Error::Config(e.to_string()))?
            .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier.to_owned()))
            .request_async(&http)
            .await
            .map_err(|e| match e {
                RequestTokenError::ServerResponse(r) => Error::Refused(r.error().to_string()),
                other => Error::Unavailable(format!("token endpoint: {}", baton_proto::error::with_sources(&other))),
            })?;
        let token = response.id_token().ok_or_else(|| Error::InvalidToken("no ID token in the answer".into()))?;
        match self.validate(&cached.metadata, token, nonce) {
            // A key the cached set lacks: the provider may have rotated its keys.
            Err(Error::InvalidToken(_)) if cached.fetched.elapsed() > Duration::from_secs(10) => {
                let fresh = self.metadata(true).await?;
                self.validate(&fresh.metadata, token, nonce)
            }
            other => other,
        }
    }

    /// Validates `token` against the provider's keys, issuer, our client id as
    /// audience, its expiry and `nonce`; reads the subject, the email address
    /// and the groups.
    pub fn validate(&self, metadata: &Metadata, token: &CoreIdToken, nonce: &str) -> Result<Person, Error> {
        let client = self.client(metadata)?;
        let verifier = client.id_token_verifier();
        let claims = token
            .claims(&verifier, &Nonce::new(nonce.to_owned()))
            .map_err(|e| Error::InvalidToken(baton_proto::error::with_sources(&e)))?;
        let subject = claims.subject().as_str().to_owned();
        // The signature holds: the payload may now be read for the configured claims.
        let payload = payload_of(&token.to_string()).ok_or_else(|| Error::InvalidToken("unreadable payload".into()))?;
        if payload.get("email_verified").and_then(serde_json::Value::as_bool) == Some(false) {
            return Err(Error::NoEmail);
        }
        let email = payload
            .get(&self.options.email_claim)
            .and_then(serde_json::Value::as_str)
            .map(|e| e.trim().to_lowercase())
            .filter(|e| e.contains('@') && e.len() <= MAX_NAME_LEN)
            .ok_or(Error::NoEmail)?;
        let named: Vec<&str> = match payload.get(&self.options.groups_claim) {
            Some(serde_json::Value::Array(items)) => items.iter().filter_map(serde_json::Value::as_str).collect(),
            Some(serde_json::Value::String(one)) => vec![one.as_str()],
            _ => Vec::new(),
        };
        // A group too long to be granted is no group; beyond the bound, the rest are not read.
        let groups =
            named.into_iter().filter(|g| g.len() <= MAX_NAME_LEN).take(MAX_GROUPS).map(str::to_owned).collect();
        Ok(Person { subject, email, groups })
    }
}

/// The JSON payload of a compact JWS (whose signature was checked already).
fn payload_of(jws: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    use base64::Engine as _;
    let part = jws.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part.trim_end_matches('=')).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
#[path = "oidc_tests.rs"]
mod tests;

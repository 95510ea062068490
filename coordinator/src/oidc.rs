//! Signing people in with the organization's OpenID provider (decision 0050):
//! the authorization code flow with PKCE, `state` and `nonce`. The coordinator,
//! which owns authorization, holds the provider's configuration (and the
//! client secret) and does every step that needs trust: it builds the
//! authorization URL, exchanges the code, and validates the ID token's
//! signature against the provider's published keys, its issuer, audience,
//! expiry and nonce. The gateway only carries the browser through: it keeps
//! `state`, `nonce` and the PKCE verifier in a sealed, short-lived cookie and
//! checks `state` on the way back. The provider's metadata and keys are
//! cached: fetched at first use, when the discovery document changes, after
//! `METADATA_TTL`, and (the keys alone) when a token names a key the cached
//! set lacks, at most once per `KEYS_REFETCH_EVERY` (key rotation). A
//! sign-in's start still probes the provider (one small GET of the discovery
//! document at a time, shared by the starts waiting for it), so a provider
//! that is down is told before the browser is sent there.

use openidconnect::core::{CoreAuthPrompt, CoreAuthenticationFlow, CoreClient, CoreIdToken};
use openidconnect::{
    AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken, HttpRequest, HttpResponse,
    IssuerUrl, LogoutRequest, Nonce, PkceCodeChallenge, PkceCodeVerifier, PostLogoutRedirectUrl,
    ProviderMetadataWithLogout, RedirectUrl, RequestTokenError, Scope, SignatureVerificationError, TokenResponse,
};

/// The provider's discovery document, with the end-session endpoint of
/// RP-initiated logout when the provider has one.
pub type Metadata = ProviderMetadataWithLogout;
use openidconnect::core::CoreJsonWebKeySet;
use openidconnect::http::header::ACCEPT;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, RwLock};

/// Metadata and keys older than this are fetched again before use.
const METADATA_TTL: Duration = Duration::from_secs(15 * 60);
/// A token naming a key the cached set lacks has the keys fetched again, but
/// not more often than this: tokens naming made-up keys cannot make Baton
/// hammer the provider.
const KEYS_REFETCH_EVERY: Duration = Duration::from_secs(10);
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

#[derive(Clone, Debug, thiserror::Error)]
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
    /// The ID token is signed with a key the provider does not publish (even
    /// after the keys were fetched again).
    #[error("the ID token is not valid: it names a key the provider does not publish")]
    UnknownKey,
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

/// The provider's metadata, its keys among them.
struct Cached {
    metadata: Metadata,
    /// The discovery document it was read from: a probe that reads the same bytes changes nothing.
    document: Vec<u8>,
    fetched: Instant,
}

/// The last probe of the provider: when it started, and what it found.
struct Probe {
    started: Instant,
    answer: Result<Arc<Cached>, Error>,
}

/// A configured provider, its metadata and keys cached.
pub struct Provider {
    options: ProviderOptions,
    http: reqwest::Client,
    cached: RwLock<Option<Arc<Cached>>>,
    /// Held while the metadata or keys are fetched (one fetch, however many
    /// wait for it); holds when the keys were last fetched again for a token
    /// naming a key the cache lacked.
    fetching: Mutex<Option<Instant>>,
    /// Held while the provider is probed: one probe at a time.
    probe: Mutex<Option<Probe>>,
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
        Ok(Provider { options, http, cached: RwLock::new(None), fetching: Mutex::new(None), probe: Mutex::new(None) })
    }

    pub fn options(&self) -> &ProviderOptions {
        &self.options
    }

    /// The cached metadata, unless there is none or it is old.
    async fn fresh(&self) -> Option<Arc<Cached>> {
        self.cached.read().await.as_ref().filter(|c| c.fetched.elapsed() < METADATA_TTL).cloned()
    }

    /// The provider's metadata and keys: cached, or fetched (once, however
    /// many callers ask at the same time).
    async fn metadata(&self) -> Result<Arc<Cached>, Error> {
        if let Some(c) = self.fresh().await {
            return Ok(c);
        }
        let _one = self.fetching.lock().await;
        // Another caller may have fetched them while this one waited.
        if let Some(c) = self.fresh().await {
            return Ok(c);
        }
        let document = self.document().await?;
        self.install(document).await
    }

    /// The discovery document's bytes.
    async fn document(&self) -> Result<Vec<u8>, Error> {
        let url = format!("{}/.well-known/openid-configuration", self.options.issuer_url.trim_end_matches('/'));
        let request = openidconnect::http::Request::get(url)
            .header(ACCEPT, "application/json")
            .body(Vec::new())
            .map_err(|e| Error::Config(format!("discovery URL: {e}")))?;
        let response = send(&self.http, request).await.map_err(|e| match e {
            Error::Unavailable(why) => Error::Unavailable(format!("discovery: {why}")),
            other => other,
        })?;
        if response.status() != openidconnect::http::StatusCode::OK {
            return Err(Error::Unavailable(format!("discovery: HTTP status {}", response.status())));
        }
        Ok(response.into_body())
    }

    /// Reads `document`, fetches the keys it points to, and caches both. The
    /// caller holds `fetching`.
    async fn install(&self, document: Vec<u8>) -> Result<Arc<Cached>, Error> {
        let issuer = IssuerUrl::new(self.options.issuer_url.clone()).map_err(|e| Error::Config(e.to_string()))?;
        let metadata: Metadata = serde_json::from_slice(&document)
            .map_err(|e| Error::Unavailable(format!("discovery: the document cannot be read: {e}")))?;
        if metadata.issuer() != &issuer {
            return Err(Error::Unavailable(format!(
                "discovery: the document names another issuer ({})",
                metadata.issuer().as_str()
            )));
        }
        let keys = self.keys(&metadata).await?;
        let fresh = Arc::new(Cached { metadata: metadata.set_jwks(keys), document, fetched: Instant::now() });
        *self.cached.write().await = Some(fresh.clone());
        Ok(fresh)
    }

    /// The provider's published keys.
    async fn keys(&self, metadata: &Metadata) -> Result<CoreJsonWebKeySet, Error> {
        CoreJsonWebKeySet::fetch_async(metadata.jwks_uri(), &Http(&self.http))
            .await
            .map_err(|e| Error::Unavailable(format!("keys: {}", baton_proto::error::with_sources(&e))))
    }

    /// The keys fetched again because a token named one that `seen` lacks
    /// (the provider rotated its keys): not when another caller refreshed
    /// the cache since `seen`, and at most once per [`KEYS_REFETCH_EVERY`].
    async fn refetch_keys(&self, seen: &Arc<Cached>) -> Result<Arc<Cached>, Error> {
        let mut last = self.fetching.lock().await;
        let current = self.cached.read().await.clone();
        if let Some(current) = current
            && (!Arc::ptr_eq(&current, seen) || last.is_some_and(|at| at.elapsed() < KEYS_REFETCH_EVERY))
        {
            return Ok(current);
        }
        *last = Some(Instant::now());
        let keys = self.keys(&seen.metadata).await?;
        let fresh = Arc::new(Cached {
            metadata: seen.metadata.clone().set_jwks(keys),
            document: seen.document.clone(),
            fetched: seen.fetched,
        });
        *self.cached.write().await = Some(fresh.clone());
        Ok(fresh)
    }

    /// Whether the provider answers now, and its metadata: the discovery
    /// document is read again (one small GET), and the cached metadata and
    /// keys are kept when it is unchanged and they are not old. One probe at
    /// a time: a caller that waited for a probe which started after it
    /// arrived takes that probe's answer, so a crowd of sign-ins costs the
    /// provider one request at a time, and each still hears of a provider
    /// that went down before it asked.
    async fn probe(&self) -> Result<Arc<Cached>, Error> {
        let arrived = Instant::now();
        let mut last = self.probe.lock().await;
        if let Some(p) = last.as_ref()
            && p.started >= arrived
        {
            return p.answer.clone();
        }
        let started = Instant::now();
        let answer = match self.document().await {
            Err(e) => Err(e),
            Ok(document) => match self.fresh().await {
                Some(c) if c.document == document => Ok(c),
                _ => {
                    let _one = self.fetching.lock().await;
                    self.install(document).await
                }
            },
        };
        *last = Some(Probe { started, answer: answer.clone() });
        answer
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
    /// PKCE verifier. The provider is probed first: one that is down is told
    /// at once, not after the browser was sent to it. With `another_account`
    /// the provider is asked to authenticate the person again
    /// (`prompt=login`), so they may sign in as someone else.
    pub async fn begin(&self, another_account: bool) -> Result<Begun, Error> {
        let cached = self.probe().await?;
        let client = self.client(&cached.metadata)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request =
            client.authorize_url(CoreAuthenticationFlow::AuthorizationCode, CsrfToken::new_random, Nonce::new_random);
        for scope in &self.options.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        if another_account {
            request = request.add_prompt(CoreAuthPrompt::Login);
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
        let cached = match self.metadata().await {
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
        let cached = self.metadata().await?;
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
            Err(Error::UnknownKey) => {
                let fresh = self.refetch_keys(&cached).await?;
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
        let claims = token.claims(&verifier, &Nonce::new(nonce.to_owned())).map_err(|e| match e {
            ClaimsVerificationError::SignatureVerification(SignatureVerificationError::NoMatchingKey) => {
                Error::UnknownKey
            }
            other => Error::InvalidToken(baton_proto::error::with_sources(&other)),
        })?;
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

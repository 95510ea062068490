//! ID token validation against a provider whose keys the test holds: a valid
//! token is read; a forged signature, another issuer or audience, an expired
//! token, a replayed nonce and an unverified email are refused.

use super::*;
use openidconnect::core::{
    CoreGenderClaim, CoreJsonWebKeySet, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm, CoreResponseType,
    CoreRsaPrivateSigningKey, CoreSubjectIdentifierType,
};
use openidconnect::{
    AdditionalClaims, Audience, AuthUrl, EmptyAdditionalProviderMetadata, EndUserEmail, IdToken, IdTokenClaims,
    JsonWebKeyId, JsonWebKeySetUrl, PrivateSigningKey, ResponseTypes, StandardClaims, SubjectIdentifier, TokenUrl,
};
use std::str::FromStr;

/// A key made for this test alone; it signs nothing anywhere else.
const TEST_KEY: &str = "-----BEGIN RSA PRIVATE KEY-----
MIIEogIBAAKCAQEAt62P32gri20Kv1YSiu83UQ2du1WUE8cyCrPFIGaEe+/jSgTZ
H3qu4PrT5QNdCgSLhcFKwYlQwGgQNHdjdPlwEOB4aoUA676JXZAMUzg90n+n3bOK
jWGhBzVTupfPlECGkvUDgWsc5fTyf5IL5zQAsORjxy+3Vy/whUMNqlNp/1IRjGN2
itdd35XHxcPljBy56j3unzHTifETg4OVlCdP39Wv4kjzNFdkxa3Tnu0aAK+CA64H
Z6+d5zxWw+dMBctBv2c2DNlOU/pcK8iY5GQXukbKiQV1LwQoa/+8GQfb/gk5eTZN
H78wCPRiLhrC80E3bc/hxbU4TeRTewjzbcOB2QIDAQABAoIBABaafEcQ6bLpw1XS
gMuqLpOB6nRATs20SLs6bjrTguBBoCXevN172oODOopHRK7T6luWct2oSVC0PbJH
Mu0VOS5KgWcSYQ+hzgO+k1W2aR07amwFCTrm1csuS9R9lCT5X9Y74qeNh+vgnesH
DQHxy1f5czHy9Ev9cUrk+oyIYVXzDSiQM22wXQ0Csu80ngrtOcBSUpzAGTAV5um7
xB1yVvJ18kDk5+h7e+nuHI4ZaqZzbWfvlB1i7kFel/9f7W+ukMilDmnIaB0jCB2r
MkDrHgztdyarZsZBIjv8RYbKHgqZWxAW2pf7E850J0g324wppNpCJpDDrVrVTZdU
qnsjwQECgYEA2lme7X8aGx3euPMFSd2GZTEFtHqInP/9qj0yh7NeMc+Ic/t36uRd
9qxJrp77GkXOLBIZ9yDxuf37O7cRzLNS6/uB4u0LT276eSuiYpVSIG5JHGBZa1Z4
wFq11Znljq2nltSdcXCVWkh6jHX6unJbwHFl+a6pUYga4iMAw90WY+ECgYEA11lz
Ljw3UUA/O7Wmuu5A3BYQG3I/c0mTM3OfbiUkxq8cXDhbXuyb7+EktVssSQ72asFE
c+p3TqZ5RwuxkkC55j+hrjKJyQLM/wGx2RxFY6GVPw6oX8A7p6SmsrELOxpgH1fx
TTsf8C0ZQIUEE2wRRLWpFDbYKHZpJ88ewqoH3PkCgYBQQerZzwMwfm00PBdwjB1v
KnK3YObAFpQNtArTuEliM68rOn5cd25WUgOPTN5tTMU4i7rBjHltbP6gd2zyeeN7
2+llGM40d01XpoM8izgxtXfoFz4m5xThVzZI+hVXuVrFZQcuADzVf5iT8nWjfI9f
EA90lA+maUnAXy9TzvsA4QKBgDXn0TownpQ7Jdj3dp3yR9APwcZtCc79CtjlR3JV
3+fQK6Q2A0E2ry4TyJGRGfvLwAknCdCOT4EjkNYk6jU2+JHXOcyWIAFuLwxiSzeS
qRfweaCINcOKJiSnxYaTZMFNr+QIqoFvnGYNk/Wflk6aTZRKeOFzfRZb1aS+Zu/J
iiBZAoGAX4c8dY/+3rrpZnf8LKJ0nbAKCc6NVdbMQQ6BDio5BKxhe8W4D8IWTvcn
Wm8PDAb1L4iu40GH9z7wldLt8aaBYwODjzDlza/2KAFg4dgBRh5CU24NlMe4HVzj
UeMkFFkr91sUVPCj2NdMkoI4TUO5f87voS15TVqHAU1ylBVyKLg=
-----END RSA PRIVATE KEY-----";

const ISSUER: &str = "https://idp.test";

#[derive(Debug, serde::Deserialize, serde::Serialize)]
struct Extra {
    #[serde(skip_serializing_if = "Option::is_none")]
    groups: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    email_verified_override: Option<bool>,
}
impl AdditionalClaims for Extra {}

fn key(kid: &str) -> CoreRsaPrivateSigningKey {
    CoreRsaPrivateSigningKey::from_pem(TEST_KEY, Some(JsonWebKeyId::new(kid.into()))).expect("test key")
}

fn provider() -> Provider {
    Provider::new(ProviderOptions {
        issuer_url: ISSUER.into(),
        client_id: "baton".into(),
        client_secret: "s3cret-never-logged".into(),
        redirect_url: "http://127.0.0.1:1/dashboard/oidc/callback".into(),
        scopes: vec!["email".into(), "groups".into()],
        email_claim: "email".into(),
        groups_claim: "groups".into(),
        post_logout_redirect_url: None,
    })
    .expect("provider")
}

fn metadata(kid: &str) -> Metadata {
    Metadata::new(
        IssuerUrl::new(ISSUER.into()).expect("issuer"),
        AuthUrl::new(format!("{ISSUER}/auth")).expect("auth"),
        JsonWebKeySetUrl::new(format!("{ISSUER}/jwks")).expect("jwks"),
        vec![ResponseTypes::new(vec![CoreResponseType::Code])],
        vec![CoreSubjectIdentifierType::Public],
        vec![CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256],
        openidconnect::LogoutProviderMetadata {
            end_session_endpoint: None,
            additional_metadata: EmptyAdditionalProviderMetadata {},
        },
    )
    .set_token_endpoint(Some(TokenUrl::new(format!("{ISSUER}/token")).expect("token")))
    .set_jwks(CoreJsonWebKeySet::new(vec![key(kid).as_verification_key()]))
}

struct Claims<'a> {
    issuer: &'a str,
    audience: &'a str,
    expires_in: i64,
    nonce: &'a str,
    email: Option<&'a str>,
    verified: Option<bool>,
    groups: Option<Vec<String>>,
}

impl Default for Claims<'_> {
    fn default() -> Self {
        Claims {
            issuer: ISSUER,
            audience: "baton",
            expires_in: 300,
            nonce: "n-1",
            email: Some("Ann@Example.org"),
            verified: Some(true),
            groups: Some(vec!["admins".into(), "devs".into()]),
        }
    }
}

fn token(c: Claims<'_>, kid: &str) -> CoreIdToken {
    let now = chrono::Utc::now();
    let mut standard = StandardClaims::<CoreGenderClaim>::new(SubjectIdentifier::new("sub-ann".into()));
    standard = standard.set_email(c.email.map(|e| EndUserEmail::new(e.into()))).set_email_verified(c.verified);
    let claims = IdTokenClaims::new(
        IssuerUrl::new(c.issuer.into()).expect("issuer"),
        vec![Audience::new(c.audience.into())],
        now + chrono::Duration::seconds(c.expires_in),
        now - chrono::Duration::seconds(600),
        standard,
        Extra { groups: c.groups, email_verified_override: None },
    )
    .set_nonce(Some(Nonce::new(c.nonce.into())));
    let signed = IdToken::<Extra, CoreGenderClaim, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm>::new(
        claims,
        &key(kid),
        CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
        None,
        None,
    )
    .expect("sign");
    CoreIdToken::from_str(&signed.to_string()).expect("parse")
}

#[test]
fn a_valid_token_names_the_person_and_their_groups() {
    let p = provider();
    let person = p.validate(&metadata("k1"), &token(Claims::default(), "k1"), "n-1").expect("valid");
    assert_eq!(
        person,
        Person {
            subject: "sub-ann".into(),
            email: "ann@example.org".into(),
            groups: vec!["admins".into(), "devs".into()]
        }
    );
    let mut many: Vec<String> = (0..1000).map(|i| format!("g{i}")).collect();
    many.insert(0, "x".repeat(400));
    let crowded = p.validate(&metadata("k1"), &token(Claims { groups: Some(many), ..Claims::default() }, "k1"), "n-1");
    let groups = crowded.expect("valid").groups;
    assert_eq!((groups.len(), groups[0].as_str()), (256, "g0"), "bounded, and no overlong name");
    let no_groups = token(Claims { groups: None, ..Claims::default() }, "k1");
    assert!(p.validate(&metadata("k1"), &no_groups, "n-1").expect("valid").groups.is_empty());
}

#[test]
fn forged_foreign_expired_and_replayed_tokens_are_refused() {
    let p = provider();
    let m = metadata("k1");
    let refused = |t: CoreIdToken, nonce: &str| p.validate(&m, &t, nonce);
    // Another nonce: a token replayed into another sign-in.
    assert!(matches!(refused(token(Claims::default(), "k1"), "n-2"), Err(Error::InvalidToken(_))));
    assert!(matches!(
        refused(token(Claims { expires_in: -60, ..Claims::default() }, "k1"), "n-1"),
        Err(Error::InvalidToken(_))
    ));
    assert!(matches!(
        refused(token(Claims { issuer: "https://evil.test", ..Claims::default() }, "k1"), "n-1"),
        Err(Error::InvalidToken(_))
    ));
    assert!(matches!(
        refused(token(Claims { audience: "other-client", ..Claims::default() }, "k1"), "n-1"),
        Err(Error::InvalidToken(_))
    ));
    // A key the provider does not publish.
    assert!(matches!(refused(token(Claims::default(), "k-unknown"), "n-1"), Err(Error::UnknownKey)));
    // A payload altered after signing.
    let good = token(Claims::default(), "k1").to_string();
    let mut parts: Vec<String> = good.split('.').map(str::to_owned).collect();
    let body = payload_of(&good).expect("payload");
    let mut evil = body.clone();
    evil.insert("email".into(), serde_json::json!("eve@example.org"));
    use base64::Engine as _;
    parts[1] = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(&evil).expect("json"));
    let tampered = CoreIdToken::from_str(&parts.join(".")).expect("parse");
    assert!(matches!(refused(tampered, "n-1"), Err(Error::InvalidToken(_))));
    assert!(matches!(
        refused(token(Claims { verified: Some(false), ..Claims::default() }, "k1"), "n-1"),
        Err(Error::NoEmail)
    ));
    assert!(matches!(refused(token(Claims { email: None, ..Claims::default() }, "k1"), "n-1"), Err(Error::NoEmail)));
}

#[test]
fn the_client_secret_is_never_in_debug_output() {
    let p = provider();
    let text = format!("{p:?} {:?}", p.options());
    assert!(!text.contains("s3cret"), "{text}");
    assert!(text.contains("baton"));
}

/// A provider on loopback for the cache's tests: it serves its discovery
/// document, the keys named in `kids` (all the test key, under those ids)
/// and a token endpoint answering `id_token`, and records every request's
/// method and path.
struct Loopback {
    issuer: String,
    requests: Arc<std::sync::Mutex<Vec<String>>>,
    kids: Arc<std::sync::Mutex<Vec<&'static str>>>,
    id_token: Arc<std::sync::Mutex<String>>,
    server: tokio::task::JoinHandle<()>,
}

impl Loopback {
    async fn start() -> Loopback {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let issuer = format!("http://{}", listener.local_addr().expect("addr"));
        let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
        let kids = Arc::new(std::sync::Mutex::new(vec!["k1"]));
        let id_token = Arc::new(std::sync::Mutex::new(String::new()));
        let (log, keys, token, base) = (requests.clone(), kids.clone(), id_token.clone(), issuer.clone());
        let server = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                // The whole request, its body too, before answering.
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while let Ok(n @ 1..) = socket.read(&mut chunk).await {
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let head = String::from_utf8_lossy(&buf).into_owned();
                let line = head.lines().next().unwrap_or_default().to_owned();
                let mut parts = line.split(' ');
                let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
                log.lock().expect("log").push(format!("{method} {path}"));
                let body = match path {
                    "/.well-known/openid-configuration" => serde_json::json!({
                        "issuer": base,
                        "authorization_endpoint": format!("{base}/auth"),
                        "token_endpoint": format!("{base}/token"),
                        "jwks_uri": format!("{base}/jwks"),
                        "response_types_supported": ["code"],
                        "subject_types_supported": ["public"],
                        "id_token_signing_alg_values_supported": ["RS256"],
                    }),
                    "/jwks" => {
                        let published: Vec<_> =
                            keys.lock().expect("kids").iter().map(|k| key(k).as_verification_key()).collect();
                        serde_json::to_value(CoreJsonWebKeySet::new(published)).expect("jwks")
                    }
                    _ => serde_json::json!({
                        "access_token": "at", "token_type": "bearer", "expires_in": 60,
                        "id_token": token.lock().expect("token").clone(),
                    }),
                };
                let body = body.to_string();
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        Loopback { issuer, requests, kids, id_token, server }
    }

    fn provider(&self) -> Provider {
        Provider::new(ProviderOptions { issuer_url: self.issuer.clone(), ..provider().options().clone() })
            .expect("provider")
    }

    fn count(&self, request: &str) -> usize {
        self.requests.lock().expect("log").iter().filter(|r| r.starts_with(request)).count()
    }

    /// The next token the token endpoint answers: signed with `kid`, for this issuer.
    fn answers(&self, kid: &str) {
        *self.id_token.lock().expect("token") =
            token(Claims { issuer: &self.issuer, ..Claims::default() }, kid).to_string();
    }
}

#[tokio::test]
async fn sign_ins_share_the_cached_keys_and_each_start_still_finds_a_provider_that_is_down() {
    let idp = Loopback::start().await;
    let p = idp.provider();
    for another_account in [false, false, true] {
        let begun = p.begin(another_account).await.expect("begin");
        assert!(begun.authorize_url.starts_with(&format!("{}/auth?", idp.issuer)), "{}", begun.authorize_url);
        assert_eq!(begun.authorize_url.contains("prompt=login"), another_account, "{}", begun.authorize_url);
    }
    // Every start reads the discovery document; the keys were fetched once.
    assert_eq!((idp.count("GET /.well-known/"), idp.count("GET /jwks")), (3, 1));
    idp.answers("k1");
    let person = p.complete("code", "verifier", "n-1").await.expect("signed in");
    assert_eq!(person.email, "ann@example.org");
    assert_eq!((idp.count("GET /.well-known/"), idp.count("GET /jwks")), (3, 1), "completing used the cache");

    idp.server.abort();
    let _ = idp.server.await;
    assert!(
        matches!(p.begin(false).await, Err(Error::Unavailable(_))),
        "the start after the provider went down says so"
    );
}

#[tokio::test]
async fn a_token_signed_with_a_new_key_has_the_keys_fetched_again_once() {
    let idp = Loopback::start().await;
    let p = idp.provider();
    p.begin(false).await.expect("begin");
    // The provider rotates: k2 signs, k1 is still published.
    *idp.kids.lock().expect("kids") = vec!["k2", "k1"];
    idp.answers("k2");
    assert_eq!(p.complete("code", "verifier", "n-1").await.expect("signed in").subject, "sub-ann");
    assert_eq!(idp.count("GET /jwks"), 2, "fetched again for the new key");
    // A token naming a key nobody publishes right after: refused, and the
    // provider is not asked again within the bound.
    idp.answers("k-made-up");
    assert!(matches!(p.complete("code", "verifier", "n-1").await, Err(Error::UnknownKey)));
    assert_eq!(idp.count("GET /jwks"), 2);
    assert_eq!(idp.count("GET /.well-known/"), 1, "only the start probed");
}

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
    assert!(matches!(refused(token(Claims::default(), "k-unknown"), "n-1"), Err(Error::InvalidToken(_))));
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

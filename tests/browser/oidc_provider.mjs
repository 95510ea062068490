// A real OpenID provider on loopback for the dashboard's sign-in check:
// `oidc-provider` (npm) with its development login and consent pages, one
// confidential client (`baton`), and three people: ann in baton-admins, bob in
// baton-members, eve in no group Baton knows, and dave, whose ID tokens are
// issued already expired. ID tokens carry email and groups.
//
// usage: node oidc_provider.mjs PORT REDIRECT_URI
import Provider from 'oidc-provider';

const [port, redirect] = process.argv.slice(2);
const people = {
  ann: { email: 'ann@example.org', groups: ['baton-admins'] },
  bob: { email: 'bob@example.org', groups: ['baton-members'] },
  eve: { email: 'eve@example.org', groups: ['outsiders'] },
  dave: { email: 'dave@example.org', groups: ['baton-admins'] },
};

const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: [{
    client_id: 'baton',
    client_secret: 'baton-test-client-secret',
    redirect_uris: [redirect],
    grant_types: ['authorization_code'],
    response_types: ['code'],
  }],
  claims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'] },
  // Claims in the ID token itself, as most providers configure them for groups.
  conformIdTokenClaims: false,
  cookies: { keys: ['baton-test-cookie-key'] },
  pkce: { required: () => true },
  // dave's ID tokens expired two minutes before they were issued.
  ttl: { IdToken: (ctx) => (ctx.oidc?.account?.accountId === 'dave' ? -120 : 3600) },
  features: { devInteractions: { enabled: true } },
  async findAccount(ctx, id) {
    const p = people[id];
    if (!p) return undefined;
    return { accountId: id, claims: async () => ({ sub: id, email: p.email, email_verified: true, groups: p.groups }) };
  },
});
provider.listen(Number(port), '127.0.0.1', () => console.log(`oidc-provider listening on ${port}`));

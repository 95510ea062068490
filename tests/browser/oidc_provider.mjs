// A real OpenID provider on loopback for the dashboard's sign-in check:
// `oidc-provider` (npm) with its development login and consent pages, one
// confidential client (`baton`), and three people: ann in baton-admins, bob in
// baton-members, eve in no group Baton knows, and dave, whose ID tokens are
// issued already expired. ID tokens carry email and groups. Its signing keys
// live in KEY_FILE (made on first start): key-1 signs; started `rotated`, the
// provider has rotated its keys: key-2 signs and key-1 is still published.
// Every request is logged as `METHOD PATH STATUS`.
//
// usage: node oidc_provider.mjs PORT REDIRECT_URI KEY_FILE [rotated]
import Provider from 'oidc-provider';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

const [port, redirect, keyFile, mode] = process.argv.slice(2);
const rsa = (kid) => ({
  ...generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' }),
  kid,
  use: 'sig',
  alg: 'RS256',
});
if (!existsSync(keyFile)) writeFileSync(keyFile, JSON.stringify({ before: rsa('key-1'), after: rsa('key-2') }));
const keys = JSON.parse(readFileSync(keyFile, 'utf8'));
const jwks = { keys: mode === 'rotated' ? [keys.after, keys.before] : [keys.before] };
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
  jwks,
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
provider.use(async (ctx, next) => {
  await next();
  console.log(`${ctx.method} ${ctx.path} ${ctx.status}`);
});
provider.listen(Number(port), '127.0.0.1', () => console.log(`oidc-provider listening on ${port} (${mode ?? 'first keys'})`));

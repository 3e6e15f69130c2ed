// A real OpenID Connect provider for the tests (panva's oidc-provider, certified by the OpenID
// Foundation), started by tests/oidc/provider.py. One confidential client, PKCE required, RS256
// ID tokens signed with a key made at start.
//
// Sign-in is oidc-provider's own development form ("any login, any password"): the login names
// the account, whose claims are the test's (PUT /__test__/state {"users": {...}}: name, email,
// email_verified, preferred_username, groups); an unknown login gets an e-mail (verified), a
// name and a preferred username made from it, and no groups.
//
// The negative tests need an ID token the provider would never issue. `mode` (same endpoint)
// rewrites the token endpoint's response: "tampered" changes the payload and keeps the
// signature; "audience", "expired", "issuer" and "nonce" re-sign a changed payload with the
// provider's own key, so that only the claim named is wrong. The app's verification is what
// refuses each.
//
// argv: port, client id, client secret, redirect URI.

import crypto from 'node:crypto';

import Provider from 'oidc-provider';

const [port, clientId, clientSecret, redirectUri] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;

const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key', alg: 'RS256', use: 'sig' };

const state = { users: {}, mode: null };

function claimsOf(id) {
  const given = state.users[id] || {};
  return {
    sub: id,
    email: given.email ?? `${id}@example.test`,
    email_verified: given.email_verified ?? true,
    name: given.name ?? id,
    preferred_username: given.preferred_username ?? id,
    groups: given.groups ?? [],
  };
}

const provider = new Provider(issuer, {
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
  }],
  jwks: { keys: [signingKey] },
  pkce: { required: () => true },
  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  features: { devInteractions: { enabled: true } },
  async findAccount(ctx, id) {
    return { accountId: id, async claims() { return claimsOf(id); } };
  },
});

const b64url = (value) => Buffer.from(value).toString('base64url');

function resign(token, change) {
  const [header, payload] = token.split('.');
  const claims = change(JSON.parse(Buffer.from(payload, 'base64url')));
  const input = `${header}.${b64url(JSON.stringify(claims))}`;
  const signature = crypto.sign('sha256', Buffer.from(input), privateKey);
  return `${input}.${signature.toString('base64url')}`;
}

const rewrite = {
  tampered(token) {
    const [header, payload, signature] = token.split('.');
    const claims = JSON.parse(Buffer.from(payload, 'base64url'));
    claims.sub = `${claims.sub}-admin`;
    return `${header}.${b64url(JSON.stringify(claims))}.${signature}`;
  },
  audience: (token) => resign(token, (claims) => ({ ...claims, aud: 'another-client' })),
  expired: (token) => resign(token, (claims) => ({
    ...claims, iat: claims.iat - 7200, exp: claims.iat - 3600,
  })),
  issuer: (token) => resign(token, (claims) => ({ ...claims, iss: 'https://elsewhere.example' })),
  nonce: (token) => resign(token, (claims) => ({ ...claims, nonce: 'an-earlier-sign-in' })),
};

provider.use(async (ctx, next) => {
  if (ctx.path === '/__test__/state' && ctx.method === 'PUT') {
    const chunks = [];
    for await (const chunk of ctx.req) chunks.push(chunk);
    Object.assign(state, JSON.parse(Buffer.concat(chunks).toString() || '{}'));
    ctx.body = state;
    return;
  }
  await next();
  if (ctx.path === '/token' && state.mode && ctx.body && ctx.body.id_token) {
    ctx.body = { ...ctx.body, id_token: rewrite[state.mode](ctx.body.id_token) };
  }
});

provider.listen(Number(port), '127.0.0.1', () => {
  console.log(`listening ${issuer}`);
});

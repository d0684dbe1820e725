// Stands in for @azure-tools/test-credential: the harness's token identity, as Azure's test
// pipeline gives its principal. Tabulae's `--oauth basic` checks a token's audience, issuer and
// times, not its signature.
const OID = "00000000-0000-0000-0000-0000000000aa";
const TENANT = "00000000-0000-0000-0000-0000000000bb"; // a tenant id: the challenge names it

function b64url(obj) {
  return Buffer.from(JSON.stringify(obj)).toString("base64url");
}

export function makeToken(seconds = 3600, audience = "https://storage.azure.com") {
  const now = Math.floor(Date.now() / 1000);
  const claims = {
    aud: audience,
    iss: "https://sts.windows.net/x/",
    iat: now - 60, nbf: now - 60, exp: now + seconds,
    oid: OID, tid: TENANT, sub: OID, appid: "jsblob-harness",
  };
  return `${b64url({ alg: "RS256", typ: "JWT" })}.${b64url(claims)}.c2ln`;
}

export function createTestCredential() {
  return {
    async getToken(scopes) {
      const scope = Array.isArray(scopes) ? scopes[0] : scopes;
      const audience = (scope || "https://storage.azure.com/.default").replace(/\/\.default$/, "");
      return { token: makeToken(3600, audience), expiresOnTimestamp: Date.now() + 3600 * 1000 };
    },
  };
}

export class NoOpCredential {
  async getToken() {
    return { token: "noop", expiresOnTimestamp: Date.now() + 3600 * 1000 };
  }
}

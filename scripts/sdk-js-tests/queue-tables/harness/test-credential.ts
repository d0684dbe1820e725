// Harness stand-in for @azure-tools/test-credential (not published to npm).
// Live mode against `tabulae serve --oauth basic`: a token Tabulae takes (it checks audience,
// issuer and times, not the signature), whose audience is the resource of the scope asked for,
// as Microsoft Entra ID would issue it.
import type { AccessToken, GetTokenOptions, TokenCredential } from "@azure/core-auth";

export const OID = "00000000-0000-0000-0000-0000000000aa";
export const TID = "00000000-0000-0000-0000-0000000000bb";

function b64url(value: string): string {
  return Buffer.from(value).toString("base64url");
}

export function fakeToken(scope: string, tenantId?: string): string {
  const now = Math.floor(Date.now() / 1000);
  const aud = scope.replace(/\/\.default$/, "");
  const claims = {
    aud,
    iss: `https://sts.windows.net/${tenantId ?? TID}/`,
    nbf: now - 60,
    iat: now - 60,
    exp: now + 3600,
    oid: OID,
    tid: tenantId ?? TID,
  };
  return `${b64url('{"alg":"none","typ":"JWT"}')}.${b64url(JSON.stringify(claims))}.sig`;
}

class LiveTestCredential implements TokenCredential {
  async getToken(scopes: string | string[], options?: GetTokenOptions): Promise<AccessToken> {
    const scope = Array.isArray(scopes) ? scopes[0] : scopes;
    return {
      token: fakeToken(scope, options?.tenantId),
      expiresOnTimestamp: Date.now() + 3600 * 1000,
      tokenType: "Bearer",
    } as AccessToken;
  }
}

export function createTestCredential(): TokenCredential {
  return new LiveTestCredential();
}

export function createLiveCredential(): TokenCredential {
  return new LiveTestCredential();
}

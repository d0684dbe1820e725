const { QueueClient } = require("@azure/storage-queue");
// A QueueClient told a wrong audience, through @azure/storage-queue over HTTPS: its first token
// is refused with 401 and the WWW-Authenticate challenge, and the SDK's challenge handling (which
// retries only when the challenge names a tenant GUID) fetches a token for the challenge's
// resource and succeeds, as the SDK's own "Bearer token challenge" test does on Azure. The
// credential mints unsigned tokens whose audience is the resource of the scope asked for, as
// Microsoft Entra ID would. Run by tests/queue/test_queue_js_sdk.py; prints "ok" or the error.
const port = process.argv[2];
const tenant = process.argv[3];
const account = "devstoreaccount1";
const scopes = [];
function b64url(value) {
  return Buffer.from(value).toString("base64url");
}
const credential = {
  async getToken(asked, options) {
    const scope = Array.isArray(asked) ? asked[0] : asked;
    scopes.push(scope);
    const now = Math.floor(Date.now() / 1000);
    const claims = {
      aud: scope.replace(/\/\.default$/, ""),
      iss: `https://sts.windows.net/${tenant}/`,
      nbf: now - 60,
      exp: now + 3600,
      oid: "00000000-0000-0000-0000-000000000001",
      tid: options?.tenantId ?? tenant,
    };
    const token = `${b64url('{"alg":"none","typ":"JWT"}')}.${b64url(JSON.stringify(claims))}.`;
    return { token, expiresOnTimestamp: Date.now() + 3600 * 1000 };
  },
};
(async () => {
  const url = `https://127.0.0.1:${port}/${account}/jschallenge${Date.now()}`;
  const queue = new QueueClient(url, credential, {
    audience: "https://badaudience.blob.core.windows.net/.default",
  });
  await queue.create();
  if (!(await queue.exists())) throw new Error("the queue was not created");
  await queue.delete();
  if (scopes[0] !== "https://badaudience.blob.core.windows.net/.default") {
    throw new Error(`first scope ${scopes[0]}`);
  }
  if (!scopes.includes("https://storage.azure.com/.default")) {
    throw new Error(`never asked for the challenge's resource: ${scopes}`);
  }
  console.log("ok");
})().catch((error) => { console.error(error); process.exit(1); });

// Global setup for the storage-queue suite in place of the upstream one (which asks Azure Resource
// Manager for the account): Tabulae's development account over HTTPS at path-style URLs
// (https://127.0.0.1:PORT/devstoreaccount1/, and devstoreaccount1-secondary for the statistics),
// its key, an account SAS made with that key, and the connection strings built from them.
import type { TestProject } from "vitest/node";
import {
  AccountSASPermissions,
  AccountSASResourceTypes,
  AccountSASServices,
  StorageSharedKeyCredential,
  generateAccountSASQueryParameters,
} from "@azure/storage-queue";

export default async function ({ provide }: TestProject): Promise<void> {
  const account = "devstoreaccount1";
  const key =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
  const port = process.env.TABULAE_QUEUE_PORT ?? "10001";
  const host = process.env.TABULAE_HOST ?? "127.0.0.1";
  const url = `https://${host}:${port}/${account}/`;
  const sas = generateAccountSASQueryParameters(
    {
      permissions: AccountSASPermissions.parse("rwdlacup"),
      services: AccountSASServices.parse("bfqt").toString(),
      resourceTypes: AccountSASResourceTypes.parse("sco").toString(),
      expiresOn: new Date(Date.now() + 2 * 3600 * 1000),
    },
    new StorageSharedKeyCredential(account, key),
  ).toString();
  const values: Record<string, string> = {
    TEST_MODE: "live",
    ACCOUNT_NAME: account,
    ACCOUNT_QUEUE_URL: url,
    ACCOUNT_KEY: key,
    ACCOUNT_SAS: sas,
    STORAGE_CONNECTION_STRING: `DefaultEndpointsProtocol=https;AccountName=${account};AccountKey=${key};QueueEndpoint=${url.slice(0, -1)};`,
    STORAGE_CONNECTION_STRING_WITH_SAS: `QueueEndpoint=${url};SharedAccessSignature=${sas}`,
    SECONDARY_ACCOUNT_NAME: `${account}-secondary`,
    SECONDARY_ACCOUNT_QUEUE_URL: `https://${host}:${port}/${account}-secondary/`,
  };
  for (const [name, value] of Object.entries(values)) {
    provide(name as any, value);
  }
}

// Global setup for the data-tables suite in place of the upstream one (which asks Azure Resource
// Manager for the account): Tabulae's development account over HTTPS at Azure's host-style name
// (harness/dns.ts resolves it to 127.0.0.1), its key, and an account SAS made with that key.
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
  const port = process.env.TABULAE_TABLE_PORT ?? "10002";
  // Host-style, as Azure's: the SDK derives the -secondary host for Get Statistics from it.
  const url = process.env.TABULAE_PATH_STYLE
    ? `https://127.0.0.1:${port}/${account}/`
    : `https://${account}.table.core.windows.net:${port}/`;
  const sas = generateAccountSASQueryParameters(
    {
      permissions: AccountSASPermissions.parse("rwdlacup"),
      services: AccountSASServices.parse("bfqt").toString(),
      resourceTypes: AccountSASResourceTypes.parse("sco").toString(),
      expiresOn: new Date(Date.now() + 3600 * 1000),
    },
    new StorageSharedKeyCredential(account, key),
  ).toString();
  const values: Record<string, unknown> = {
    TEST_MODE: "live",
    TABLES_URL: url,
    ALLOW_SHARED_KEY_ACCESS: true,
    ACCOUNT_KEY: key,
    ACCOUNT_NAME: account,
    ACCOUNT_CONNECTION_STRING: `DefaultEndpointsProtocol=https;AccountName=${account};AccountKey=${key};TableEndpoint=${url}`,
    SAS_CONNECTION_STRING: `TableEndpoint=${url};SharedAccessSignature=${sas}`,
    SAS_TOKEN: sas,
  };
  for (const [name, value] of Object.entries(values)) {
    provide(name as any, value as any);
  }
}

// Runs the upstream data-tables tests (copied into ./tables) against the published npm package,
// live against Tabulae: see README.md.
import { defineConfig } from "vitest/config";
import { fileURLToPath } from "node:url";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  resolve: {
    alias: {
      "@azure-tools/test-credential": here("./harness/test-credential.ts"),
      "@azure-tools/test-utils-vitest": here("./harness/test-utils-vitest.ts"),
      "$internal": here("./node_modules/@azure/data-tables/dist/esm"),
    },
  },
  test: {
    exclude: ["**/browser/**", "**/*.browser.spec.ts", "**/node_modules/**"],
    include: ["tables/**/*.spec.ts"],
    globalSetup: [here("./harness/setup-tables.ts")],
    setupFiles: [here("./harness/dns.ts")],
    testTimeout: 120000,
    hookTimeout: 60000,
    fileParallelism: false,
    reporters: ["verbose"],
  },
});

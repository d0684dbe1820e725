// vitest settings for Microsoft's storage-blob / storage-file-datalake test folders run live
// against Tabulae (run.sh passes --root PACKAGE_DIR). SUITE is the directory holding the
// extracted monorepo pieces and node_modules; HARNESS this directory.
import path from "node:path";
import { defineConfig } from "vitest/config";

const suite = process.env.SUITE;
const harness = process.env.HARNESS;
export default defineConfig({
  resolve: {
    alias: {
      "@azure-tools/test-utils-vitest": path.join(suite, "sdk/test-utils/test-utils-vitest/src/index.ts"),
      "@azure-tools/test-credential": path.join(harness, "test-credential.mjs"),
    },
  },
  test: {
    testTimeout: 300000,
    hookTimeout: 300000,
    reporters: ["verbose", "json"],
    outputFile: { json: process.env.JSON_OUT || "results.json" },
    watch: false,
    fileParallelism: false,
    include: ["test/**/*.spec.ts"],
    exclude: ["test/**/browser/*.spec.ts", "test/snippets.spec.ts"],
    setupFiles: [path.join(harness, "redirect.mjs")],
    typecheck: { enabled: false },
  },
});

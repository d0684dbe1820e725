// Sends every TLS connection the SDK opens to *.core.windows.net (the tests' hard-coded
// host-style URLs) to the local Tabulae server instead, keeping Host and SNI, so the suites run
// unchanged. Port from TABULAE_TLS_PORT.
import tls from "node:tls";

const port = Number(process.env.TABULAE_TLS_PORT || 47000);
const original = tls.connect;
tls.connect = function (...args) {
  const first = args[0];
  if (first && typeof first === "object" && typeof first.host === "string" &&
      first.host.endsWith(".core.windows.net")) {
    args[0] = { ...first, host: "127.0.0.1", port, servername: first.servername || first.host };
  }
  return original.apply(this, args);
};

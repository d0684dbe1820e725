// Harness: host-style names of the public cloud (account.table.core.windows.net, and the
// -secondary one the SDK derives) resolve to the local server, as a hosts file would.
import dns from "node:dns";

const original = dns.lookup;
(dns as any).lookup = function (hostname: string, options: any, callback?: any) {
  if (typeof hostname === "string" && hostname.endsWith(".core.windows.net")) {
    const cb = typeof options === "function" ? options : callback;
    const opts = typeof options === "object" && options !== null ? options : {};
    if (opts.all) {
      return process.nextTick(() => cb(null, [{ address: "127.0.0.1", family: 4 }]));
    }
    return process.nextTick(() => cb(null, "127.0.0.1", 4));
  }
  return (original as any).call(dns, hostname, options, callback);
};

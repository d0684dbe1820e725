const { DataLakeServiceClient, StorageSharedKeyCredential } = require("@azure/storage-file-datalake");
// @azure/storage-file-datalake, unchanged, on the path-style endpoint UseDevelopmentStorage=true
// gives (http://127.0.0.1:{port}/devstoreaccount1) of the server on port argv[2], whose account
// has a hierarchical namespace. Run by tests/dfs/test_dfs_js_sdk.py; prints "ok <file system>".
// Its moves send the destination without the account and the source with it.
const port = process.argv[2];
const account = "devstoreaccount1";
const key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const assert = (c, m) => { if (!c) { throw new Error("assertion failed: " + m); } };
const text = async (file) => {
  const chunks = [];
  for await (const chunk of (await file.read()).readableStreamBody) chunks.push(chunk);
  return Buffer.concat(chunks).toString();
};
const names = async (fs) => {
  const found = [];
  for await (const path of fs.listPaths({ recursive: true })) found.push(path.name + (path.isDirectory ? "/" : ""));
  return found;
};
(async () => {
  const service = new DataLakeServiceClient(`http://127.0.0.1:${port}/${account}`, new StorageSharedKeyCredential(account, key));
  const name = "jsfs" + Date.now();
  const fs = service.getFileSystemClient(name);
  await fs.create();
  await fs.getDirectoryClient("a/b").create();
  const file = fs.getFileClient("a/b/f.txt");
  await file.create();
  await file.append("hello", 0, 5);
  await file.append(" lake", 5, 5);
  await file.flush(10);
  assert((await text(file)) === "hello lake", "read back");
  // a directory moved within the file system, then a file moved to another one
  await fs.getDirectoryClient("a").move("c");
  assert(JSON.stringify(await names(fs)) === JSON.stringify(["c/", "c/b/", "c/b/f.txt"]), JSON.stringify(await names(fs)));
  const other = service.getFileSystemClient(name + "x");
  await other.create();
  await fs.getFileClient("c/b/f.txt").move(other.name, "moved.txt");
  assert((await text(other.getFileClient("moved.txt"))) === "hello lake", "moved across file systems");
  assert(JSON.stringify(await names(fs)) === JSON.stringify(["c/", "c/b/"]), "source gone");
  // a move whose source is missing fails as on Azure
  let code = "";
  try { await fs.getFileClient("nope.txt").move("elsewhere.txt"); } catch (e) { code = e.statusCode + " " + e.details.errorCode; }
  assert(code === "404 SourcePathNotFound", code);
  const acl = await other.getFileClient("moved.txt").getAccessControl();
  assert(acl.permissions.owner.read && acl.permissions.owner.write, JSON.stringify(acl.permissions));
  await other.delete();
  await fs.delete();
  console.log("ok " + name);
})().catch((e) => { console.error(e); process.exit(1); });

const { BlobServiceClient, StorageSharedKeyCredential, generateBlobSASQueryParameters, BlobSASPermissions,
        ContainerSASPermissions, BlockBlobClient, ContainerClient } = require("@azure/storage-blob");
const crypto = require("crypto");
// The Blob operations of issue 19 through @azure/storage-blob, unchanged, against the server on port argv[2].
// Run by tests/blob/test_blob_js_sdk.py; prints "ok <container>" or fails with the error.
const port = process.argv[2];
const account = "devstoreaccount1";
const key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const endpoint = `http://127.0.0.1:${port}/${account}`;
const cs = `DefaultEndpointsProtocol=http;AccountName=${account};AccountKey=${key};BlobEndpoint=${endpoint};`;
const assert = (c, m) => { if (!c) { throw new Error("assertion failed: " + m); } };
const sha = (b) => crypto.createHash("sha256").update(b).digest("hex");
(async () => {
  const service = BlobServiceClient.fromConnectionString(cs);
  const name = "jsc" + Date.now();
  const container = service.getContainerClient(name);
  await container.create({ metadata: { Team: "blue" } });
  const cprops = await container.getProperties();
  assert(cprops.metadata.team === "blue", JSON.stringify(cprops.metadata)); // the JS SDK lower-cases names
  let listed = [];
  for await (const c of service.listContainers({ prefix: "jsc", includeMetadata: true })) listed.push(c.name);
  assert(listed.includes(name), "listed");
  // Put Blob, download whole and by range, properties and metadata
  const data = crypto.randomBytes(300 * 1024);
  const blob = container.getBlockBlobClient("dir/one.bin");
  await blob.upload(data, data.length, { blobHTTPHeaders: { blobContentType: "application/x-test" }, metadata: { k: "v" } });
  const whole = await blob.downloadToBuffer();
  assert(sha(whole) === sha(data), "whole");
  const part = await blob.downloadToBuffer(1000, 5000);
  assert(sha(part) === sha(data.subarray(1000, 6000)), "range");
  const props = await blob.getProperties();
  assert(props.contentLength === data.length && props.contentType === "application/x-test", "properties");
  assert(props.metadata.k === "v", "metadata");
  await blob.setMetadata({ n: "1" });
  await blob.setHTTPHeaders({ blobContentType: "text/plain", blobCacheControl: "no-cache" });
  const props2 = await blob.getProperties();
  assert(props2.contentType === "text/plain" && props2.cacheControl === "no-cache" && props2.metadata.n === "1", "set");
  // Blocks staged out of order, committed in order; uncommitted and committed lists
  const staged = container.getBlockBlobClient("dir/blocks.bin");
  const ids = [0, 1, 2].map((i) => Buffer.from(`block-${i}`).toString("base64"));
  const parts = [0, 1, 2].map(() => crypto.randomBytes(70 * 1024));
  for (const i of [2, 0, 1]) await staged.stageBlock(ids[i], parts[i], parts[i].length);
  const uncommitted = await staged.getBlockList("uncommitted");
  assert(uncommitted.uncommittedBlocks.length === 3, "uncommitted");
  await staged.commitBlockList(ids);
  const committed = await staged.getBlockList("committed");
  assert(committed.committedBlocks.map((b) => b.name).join() === ids.join(), "committed order");
  assert(sha(await staged.downloadToBuffer()) === sha(Buffer.concat(parts)), "blocks content");
  // uploadData splits a large buffer into staged blocks itself
  const big = crypto.randomBytes(9 * 1024 * 1024);
  const bigBlob = container.getBlockBlobClient("big.bin");
  await bigBlob.uploadData(big, { blockSize: 4 * 1024 * 1024, maxSingleShotSize: 1024 * 1024, concurrency: 2 });
  assert(sha(await bigBlob.downloadToBuffer()) === sha(big), "uploadData");
  // Listing: flat and by hierarchy
  const flat = [];
  for await (const b of container.listBlobsFlat({ includeMetadata: true })) flat.push(b.name);
  assert(flat.join() === "big.bin,dir/blocks.bin,dir/one.bin", "flat " + flat.join());
  const tree = [];
  for await (const item of container.listBlobsByHierarchy("/")) tree.push(item.kind + ":" + item.name);
  assert(tree.sort().join() === "blob:big.bin,prefix:dir/", "hierarchy " + tree.join()); // the SDK yields a page's prefixes first
  // Append blob
  const log = container.getAppendBlobClient("log.txt");
  await log.create();
  await log.appendBlock("one\n", 4);
  await log.appendBlock("two\n", 4, { conditions: { appendPosition: 4 } });
  try { await log.appendBlock("x", 1, { conditions: { appendPosition: 1 } }); assert(false, "appendpos"); }
  catch (e) { assert(e.statusCode === 412 && e.code === "AppendPositionConditionNotMet", "appendpos " + e.code); }
  assert((await log.downloadToBuffer()).toString() === "one\ntwo\n", "append content");
  // Leases: a second client cannot write while the first holds it
  const lease = blob.getBlobLeaseClient();
  await lease.acquireLease(15);
  try { await blob.setMetadata({ x: "y" }); assert(false, "leased"); }
  catch (e) { assert(e.statusCode === 412 && e.code === "LeaseIdMissing", "leased " + e.code); }
  await blob.setMetadata({ x: "y" }, { conditions: { leaseId: lease.leaseId } });
  await lease.releaseLease();
  // Conditions
  const etag = (await blob.getProperties()).etag;
  try { await blob.upload("z", 1, { conditions: { ifNoneMatch: etag } }); assert(false, "if-none-match"); }
  catch (e) { assert(e.statusCode === 412 || e.statusCode === 409, "if-none-match " + e.statusCode); }
  // Snapshot, copy
  const snap = await blob.createSnapshot();
  await blob.upload("new", 3);
  const snapClient = blob.withSnapshot(snap.snapshot);
  assert(sha(await snapClient.downloadToBuffer()) === sha(data), "snapshot content");
  const copy = container.getBlockBlobClient("copy.bin");
  const poller = await copy.beginCopyFromURL(staged.url);
  await poller.pollUntilDone();
  assert(sha(await copy.downloadToBuffer()) === sha(Buffer.concat(parts)), "copy");
  // SAS: a read SAS reads and cannot write; a container SAS stays in its container
  const cred = new StorageSharedKeyCredential(account, key);
  const expiresOn = new Date(Date.now() + 3600e3);
  const readSas = generateBlobSASQueryParameters({ containerName: name, blobName: "dir/blocks.bin",
      permissions: BlobSASPermissions.parse("r"), expiresOn, contentType: "application/x-override" }, cred).toString();
  const reader = new BlockBlobClient(`${endpoint}/${name}/dir/blocks.bin?${readSas}`);
  const viaSas = await reader.download();
  assert(viaSas.contentType === "application/x-override", "rsct " + viaSas.contentType);
  try { await reader.upload("w", 1); assert(false, "read sas wrote"); }
  catch (e) { assert(e.statusCode === 403, "read sas " + e.statusCode); }
  const containerSas = generateBlobSASQueryParameters({ containerName: name,
      permissions: ContainerSASPermissions.parse("rl"), expiresOn }, cred).toString();
  const scoped = new ContainerClient(`${endpoint}/${name}?${containerSas}`);
  let count = 0;
  for await (const b of scoped.listBlobsFlat()) { count += b.name ? 1 : 0; }
  assert(count === 5, "container sas list " + count);
  const elsewhere = new ContainerClient(`${endpoint}/other${name}?${containerSas}`);
  try { await elsewhere.getProperties(); assert(false, "other container"); }
  catch (e) { assert(e.statusCode === 403, "other container " + e.statusCode); }
  // Anonymous read with public access "blob"
  await container.setAccessPolicy("blob");
  const anonymous = new BlockBlobClient(`${endpoint}/${name}/dir/blocks.bin`);
  assert(sha(await anonymous.downloadToBuffer()) === sha(Buffer.concat(parts)), "anonymous read");
  // The account's batch from the service client, whose path-style URL the SDK takes for a
  // container's: it sends POST /devstoreaccount1?comp=batch&restype=container
  const doomed = ["batch/a", "batch/b"].map((n) => container.getBlockBlobClient(n));
  for (const b of doomed) await b.upload("x", 1);
  const batched = await service.getBlobBatchClient().deleteBlobs(doomed.map((b) => b.url), cred);
  assert(batched.subResponsesSucceededCount === 2, "batch " + JSON.stringify(batched.subResponses.map((r) => r.status)));
  for (const b of doomed) assert(!(await b.exists()), "batch deleted " + b.name);
  // Deletes
  try { await blob.delete(); assert(false, "snapshots present"); }
  catch (e) { assert(e.statusCode === 409 && e.code === "SnapshotsPresent", "snapshots " + e.code); }
  await blob.delete({ deleteSnapshots: "include" });
  try { await blob.getProperties(); assert(false, "deleted"); }
  catch (e) { assert(e.statusCode === 404, "deleted " + e.statusCode); }
  await container.delete();
  try { await container.getProperties(); assert(false, "container gone"); }
  catch (e) { assert(e.statusCode === 404, "container gone " + e.statusCode); }
  console.log("ok " + name);
})().catch((e) => { console.error(e); process.exit(1); });

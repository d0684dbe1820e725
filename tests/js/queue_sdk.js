const { QueueServiceClient, StorageSharedKeyCredential, generateAccountSASQueryParameters,
        AccountSASPermissions, AccountSASResourceTypes, AccountSASServices, QueueSASPermissions,
        generateQueueSASQueryParameters, QueueClient } = require("@azure/storage-queue");
// Every Queue operation through @azure/storage-queue, unchanged, against the server on port argv[2].
// Run by tests/queue/test_queue_js_sdk.py; prints "ok <queue>" or fails with the error.
const port = process.argv[2];
const account = "devstoreaccount1";
const key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const cs = `DefaultEndpointsProtocol=http;AccountName=${account};AccountKey=${key};QueueEndpoint=http://127.0.0.1:${port}/${account};`;
const assert = (c, m) => { if (!c) { throw new Error("assertion failed: " + m); } };
(async () => {
  const service = QueueServiceClient.fromConnectionString(cs);
  const name = "jsq" + Date.now();
  const queue = service.getQueueClient(name);
  await queue.create({ metadata: { Color: "blue" } });
  const props = await queue.getProperties();
  assert(props.metadata.color === "blue", JSON.stringify(props.metadata)); // the JS SDK lower-cases names
  assert(props.approximateMessagesCount === 0, "count");
  await queue.setMetadata({ size: "10" });
  const exists = await queue.exists(); assert(exists, "exists");
  const r = await queue.createIfNotExists(); assert(r.succeeded === false, "createIfNotExists");
  let names = [];
  for await (const q of service.listQueues({ prefix: "jsq", includeMetadata: true })) names.push(q.name);
  assert(names.includes(name), "listed");
  for await (const page of service.listQueues({ prefix: "jsq" }).byPage({ maxPageSize: 1 })) { assert(page.queueItems.length <= 1, "page"); }
  const start = new Date(Date.UTC(2024, 0, 1)); const expiry = new Date(Date.now() + 3600e3);
  await queue.setAccessPolicy([{ id: "p1", accessPolicy: { permissions: "raup", startsOn: start, expiresOn: expiry } }]);
  const acl = await queue.getAccessPolicy(); assert(acl.signedIdentifiers[0].id === "p1", "acl");
  const sent = await queue.sendMessage("hello <js>", { visibilityTimeout: 0, messageTimeToLive: -1 });
  assert(sent.messageId && sent.popReceipt, "sent");
  const peeked = await queue.peekMessages({ numberOfMessages: 5 });
  assert(peeked.peekedMessageItems[0].messageText === "hello <js>", "peek");
  const got = await queue.receiveMessages({ numberOfMessages: 1, visibilityTimeout: 30 });
  const m = got.receivedMessageItems[0]; assert(m.dequeueCount === 1, "dequeue");
  const upd = await queue.updateMessage(m.messageId, m.popReceipt, "updated", 0);
  assert(upd.popReceipt && upd.nextVisibleOn, "update");
  const again = await queue.receiveMessages();
  assert(again.receivedMessageItems[0].messageText === "updated", "updated text");
  await queue.deleteMessage(again.receivedMessageItems[0].messageId, again.receivedMessageItems[0].popReceipt);
  await queue.sendMessage("a"); await queue.sendMessage("b");
  await queue.clearMessages();
  const after = await queue.getProperties(); assert(after.approximateMessagesCount === 0, "cleared");
  const properties = await service.getProperties();
  assert(properties.hourMetrics !== undefined, "service properties");
  await service.setProperties({ cors: [] });
  // SAS: account and queue, through fresh clients
  const cred = new StorageSharedKeyCredential(account, key);
  const accountSas = generateAccountSASQueryParameters({ expiresOn: expiry, permissions: AccountSASPermissions.parse("rwdlacup"),
      resourceTypes: AccountSASResourceTypes.parse("sco").toString(), services: AccountSASServices.parse("q").toString() }, cred).toString();
  const viaAccount = new QueueClient(`http://127.0.0.1:${port}/${account}/${name}?${accountSas}`);
  await viaAccount.sendMessage("by account sas");
  const queueSas = generateQueueSASQueryParameters({ queueName: name, expiresOn: expiry, permissions: QueueSASPermissions.parse("rp") }, cred).toString();
  const viaQueue = new QueueClient(`http://127.0.0.1:${port}/${account}/${name}?${queueSas}`);
  const byQueue = await viaQueue.receiveMessages(); assert(byQueue.receivedMessageItems.length === 1, "queue sas");
  const policySas = generateQueueSASQueryParameters({ queueName: name, identifier: "p1" }, cred).toString();
  const viaPolicy = new QueueClient(`http://127.0.0.1:${port}/${account}/${name}?${policySas}`);
  await viaPolicy.peekMessages();
  try { await queue.deleteMessage(m.messageId, m.popReceipt); assert(false, "stale"); } catch (e) { assert(e.statusCode === 404, "stale code " + e.statusCode); }
  try { await service.getQueueClient("Bad_Name").create(); assert(false, "bad"); } catch (e) { assert(e.statusCode === 400, "bad name"); }
  await queue.delete();
  try { await queue.getProperties(); assert(false, "gone"); } catch (e) { assert(e.statusCode === 404 && e.code === "QueueNotFound", "gone " + e.code); }
  console.log("ok " + name);
})().catch((e) => { console.error(e); process.exit(1); });

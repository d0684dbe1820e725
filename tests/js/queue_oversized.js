const { QueueServiceClient } = require("@azure/storage-queue");
// A Send Message body far over the 4 MiB a request may carry, through @azure/storage-queue, which
// writes the whole body before it reads: it must get Azure's 413 RequestBodyTooLarge, not a
// reset connection. Run by tests/queue/test_queue_js_sdk.py; prints "ok" or the error.
const port = process.argv[2];
const account = "devstoreaccount1";
const key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const cs = `DefaultEndpointsProtocol=http;AccountName=${account};AccountKey=${key};QueueEndpoint=http://127.0.0.1:${port}/${account};`;
(async () => {
  const service = QueueServiceClient.fromConnectionString(cs, { retryOptions: { maxTries: 1 } });
  const queue = service.getQueueClient("jsbig" + Date.now());
  await queue.create();
  try {
    await queue.sendMessage("x".repeat(16 * 1024 * 1024));
    throw new Error("an oversized message was accepted");
  } catch (error) {
    if (error.statusCode !== 413 || error.code !== "RequestBodyTooLarge") {
      console.error(`expected 413 RequestBodyTooLarge, got ${error.statusCode} ${error.code}: ${error.message}`);
      process.exit(1);
    }
  } finally {
    await queue.delete();
  }
  console.log("ok");
})().catch((error) => { console.error(error); process.exit(1); });

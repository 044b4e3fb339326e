// The TypeScript SDK's StreamableHTTPClientTransport across a restart of
// mcpmux (see ../httpsession_test.go): the client initializes, calls echo,
// gets a list change on its GET stream, then waits at the checkpoint
// "restart" while the Go test stops the daemon and starts it again on the
// same port. It then calls echo again on the same session, and waits for
// the SDK to reconnect its GET stream by itself. A wrapped fetch notes the
// status of every GET.
//
// args: {url, token}
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { args, main, checkpoint, text, sleep, requestTimeout, log } from "./lib.mjs";

const until = async (cond, ms) => {
  const deadline = Date.now() + ms;
  while (!cond() && Date.now() < deadline) await sleep(50);
  return cond();
};

main(async () => {
  const gets = [];
  let changes = 0;
  const tapped = async (url, init) => {
    const resp = await fetch(url, init);
    if ((init?.method ?? "GET") === "GET") {
      gets.push(resp.status);
      log(`GET ${resp.status}`);
    }
    return resp;
  };
  const transport = new StreamableHTTPClientTransport(new URL(args.url), {
    requestInit: { headers: { Authorization: `Bearer ${args.token}` } },
    fetch: tapped,
    reconnectionOptions: { initialReconnectionDelay: 100, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1.5, maxRetries: 100 },
  });
  const client = new Client({ name: "http-restart", version: "1" });
  client.fallbackNotificationHandler = async (n) => {
    if (n.method === "notifications/tools/list_changed") changes++;
  };
  await client.connect(transport);
  const sessionBefore = transport.sessionId;
  const opened = await until(() => gets.includes(200), 10000);
  const before = text(await client.callTool({ name: "echo", arguments: { text: "before" } }, undefined, { timeout: requestTimeout }));
  await client.callTool({ name: "notify", arguments: { method: "notifications/tools/list_changed" } }, undefined, { timeout: requestTimeout });
  const changed = await until(() => changes > 0, 10000);
  const getsBefore = gets.length;

  await checkpoint("restart");

  const after = text(await client.callTool({ name: "echo", arguments: { text: "after" } }, undefined, { timeout: requestTimeout }));
  const reopened = await until(() => gets.slice(getsBefore).includes(200), 20000);
  const sessionAfter = transport.sessionId;
  await client.close();
  return { sessionBefore, sessionAfter, opened, changed, before, after, reopened, gets, getsBefore };
});

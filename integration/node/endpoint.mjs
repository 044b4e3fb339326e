// One TypeScript SDK client on an endpoint that holds server-everything,
// server-memory and the demo server (see ../endpoint_realworld_test.go):
// the tools of all three, prefixed; each server's tool called through its
// prefix; a tool the view hides refused (the demo server's stats, asked
// before and after, say whether the call reached it); a sampling request of
// one server answered by this client; a list_changed of one server counted
// on the wire; and every listed resource read and subscribed.
//
// args: {target, hidden, sampled}: target as in lib.mjs ("connect" with no
// server, or "http" at /mcp); hidden the prefixed name of the hidden tool;
// sampled the text this client's sampling handler answers with.
import { CreateMessageRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { args, main, connect, opts, text, callError, closeAll, sleep } from "./lib.mjs";

main(async () => {
  const handlers = [[CreateMessageRequestSchema, async () => ({ role: "assistant", model: "endpoint-test", content: { type: "text", text: args.sampled } })]];
  const c = await connect(`endpoint-${args.target.kind}`, args.target, { sampling: {} }, handlers);
  const init = c.tap.responseTo(c.tap.sent("initialize").id)?.result;
  const { tools } = await c.client.listTools(undefined, opts());

  const everything = await c.client.callTool({ name: "everything__echo", arguments: { message: "to everything" } }, undefined, opts());
  const memory = await c.client.callTool({ name: "memory__read_graph", arguments: {} }, undefined, opts());
  const demo = await c.client.callTool({ name: "demo__echo", arguments: { text: "to demo" } }, undefined, opts());

  // The hidden tool: demo's request count, before and after.
  const stats = async () => JSON.parse(text(await c.client.callTool({ name: "demo__stats", arguments: {} }, undefined, opts())));
  const before = await stats();
  const hidden = await callError(c, () => c.client.callTool({ name: args.hidden, arguments: {} }, undefined, opts()));
  const after = await stats();

  const asked = await c.client.callTool({ name: "demo__ask", arguments: { text: "sample this" } }, undefined, opts());

  // One server's list_changed: list first (a server may have said its list
  // changed since, and the endpoint says so once until the client lists
  // again), wait until the wire has the demo's, then let a round trip to
  // that server pass, and count.
  await c.client.listTools(undefined, opts());
  const changedBefore = c.tap.notifications("notifications/tools/list_changed").length;
  await c.client.callTool({ name: "demo__notify", arguments: { method: "notifications/tools/list_changed" } }, undefined, opts());
  const changed = () => c.tap.notifications("notifications/tools/list_changed").length - changedBefore;
  for (let i = 0; i < 100 && changed() === 0; i++) await sleep(50);
  await c.client.callTool({ name: "demo__echo", arguments: { text: "after the change" } }, undefined, opts());
  await c.client.ping(opts());

  const { resources } = await c.client.listResources(undefined, opts());
  const read = [];
  for (const r of resources.slice(0, 3)) {
    const got = await c.client.readResource({ uri: r.uri }, opts());
    await c.client.subscribeResource({ uri: r.uri }, opts());
    await c.client.unsubscribeResource({ uri: r.uri }, opts());
    read.push({ uri: r.uri, contents: got.contents.length });
  }
  await closeAll([c]);

  return {
    instructions: init?.instructions ?? "",
    capabilities: init?.capabilities ?? {},
    tools: tools.map((t) => t.name),
    everything: text(everything),
    memory: text(memory),
    demo: text(demo),
    hidden,
    demoRequests: { before: before.requests, after: after.requests },
    asked: text(asked),
    listChanged: changed(),
    resources: resources.length,
    read,
  };
});

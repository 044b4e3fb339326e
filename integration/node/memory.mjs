// Three TypeScript SDK clients share one server-memory through mcpmux, each
// over another transport: `mcpmux connect`, WebSocket, and `mcpmux connect
// --yamux`. What one writes, the others read.
//
// args: {connect, ws, yamux (targets), entity, other}
import { args, main, connect, opts, checkpoint, closeAll } from "./lib.mjs";

const graphURI = "memory://knowledge-graph";

// graph is a memory tool's answer: its structured content (the same JSON
// as its text).
function graph(result) {
  if (result.isError) throw new Error(`tool failed: ${JSON.stringify(result.content)}`);
  return result.structuredContent ?? JSON.parse(result.content[0].text);
}

main(async () => {
  const [a, b, c] = await Promise.all([
    connect("memory-connect", args.connect),
    connect("memory-ws", args.ws),
    connect("memory-yamux", args.yamux),
  ]);
  await checkpoint("connected");
  const call = (cl, name, a) => cl.client.callTool({ name, arguments: a }, undefined, opts());
  const out = {};

  // c watches the graph resource: every write by a or b must reach it.
  await c.client.subscribeResource({ uri: graphURI }, opts());

  await call(a, "create_entities", { entities: [{ name: args.entity, entityType: "test", observations: ["created over mcpmux connect"] }] });
  out.bOpens = graph(await call(b, "open_nodes", { names: [args.entity] }));
  out.cSearches = graph(await call(c, "search_nodes", { query: args.entity }));

  await call(b, "add_observations", { observations: [{ entityName: args.entity, contents: ["added over WebSocket"] }] });
  await call(c, "create_entities", { entities: [{ name: args.other, entityType: "test", observations: ["created over yamux"] }] });
  await call(c, "create_relations", { relations: [{ from: args.other, to: args.entity, relationType: "shares a server with" }] });
  out.aReads = graph(await call(a, "read_graph", {}));
  out.bOpensBoth = graph(await call(b, "open_nodes", { names: [args.entity, args.other] }));

  // Each session's messages stay in order: once a ping is answered, the
  // updates sent before it have arrived.
  await Promise.all([a, b, c].map((cl) => cl.client.ping(opts())));
  const updated = (cl) => cl.tap.notifications("notifications/resources/updated").map((n) => n.params.uri);
  out.updates = { a: updated(a), b: updated(b), c: updated(c) };
  await closeAll([a, b, c]);
  return out;
});

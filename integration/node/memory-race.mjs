// Three TypeScript SDK clients share one server-memory through mcpmux and
// create their entities at the same moment, round after round; then one
// reads the graph. server-memory reads its file, adds, and writes it back
// for each call: calls that overlap lose each other's entities unless
// mcpmux lets them through one at a time (max_concurrency = 1).
//
// args: {target, rounds}
import { args, main, connect, opts, closeAll } from "./lib.mjs";

main(async () => {
  const clients = await Promise.all(["race-a", "race-b", "race-c"].map((name) => connect(name, args.target)));
  const created = [];
  for (let round = 0; round < args.rounds; round++) {
    await Promise.all(
      clients.map((cl, i) => {
        const name = `race-${round}-${i}`;
        created.push(name);
        return cl.client.callTool(
          { name: "create_entities", arguments: { entities: [{ name, entityType: "test", observations: [`round ${round}`] }] } },
          undefined,
          opts(),
        );
      }),
    );
  }
  const res = await clients[0].client.callTool({ name: "read_graph", arguments: {} }, undefined, opts());
  const graph = res.structuredContent ?? JSON.parse(res.content[0].text);
  await closeAll(clients);
  return { created, kept: graph.entities.map((e) => e.name) };
});

// A small MCP server on stdio, made with the official TypeScript SDK
// (@modelcontextprotocol/sdk, installed in end2end/node_modules), for what
// server-everything does not do: it lists its tools two per page; its tool
// `grow` adds a tool (`grown-1`, `grown-2`, …) and announces
// `notifications/tools/list_changed`; `sleep` runs until the client sends
// `notifications/cancelled` for it; `sleeping` says how many sleep calls
// run now, `cancelled` how many were cancelled; `big-image` returns an
// image of 600,000 bytes (800,000 characters of base64).
//
// Usage: node paged_server.cjs END2END_DIR

const { createRequire } = require("node:module");

const sdk = createRequire(`${process.argv[2]}/package.json`);
const { Server } = sdk("@modelcontextprotocol/sdk/server/index.js");
const { StdioServerTransport } = sdk("@modelcontextprotocol/sdk/server/stdio.js");
const { ListToolsRequestSchema, CallToolRequestSchema } = sdk("@modelcontextprotocol/sdk/types.js");

const tool = (name, description, readOnly) => ({
  name,
  description,
  inputSchema: { type: "object", properties: {} },
  annotations: { readOnlyHint: readOnly },
});
const tools = [
  tool("page-1-a", "The first tool of page 1", true),
  tool("page-1-b", "The second tool of page 1", true),
  tool("page-2-a", "The first tool of page 2", true),
  tool("page-2-b", "The second tool of page 2", true),
  tool("grow", "Adds a tool to this server's list", true),
  tool("sleep", "Runs until it is cancelled", true),
  tool("sleeping", "How many sleep calls run now", true),
  tool("big-image", "Returns a large image", true),
  tool("cancelled", "How many sleep calls were cancelled", true),
];
let sleeping = 0;
let cancelled = 0;

const server = new Server(
  { name: "paged-server", version: "1.0.0" },
  { capabilities: { tools: { listChanged: true } } },
);

server.setRequestHandler(ListToolsRequestSchema, async (request) => {
  const from = Number(request.params?.cursor ?? 0);
  const page = tools.slice(from, from + 2);
  const next = from + 2 < tools.length ? String(from + 2) : undefined;
  return next === undefined ? { tools: page } : { tools: page, nextCursor: next };
});

server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
  const name = request.params.name;
  if (name === "sleep") {
    sleeping += 1;
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, 600_000);
      extra.signal.addEventListener("abort", () => {
        cancelled += 1;
        clearTimeout(timer);
        resolve();
      });
    });
    sleeping -= 1;
    return { content: [{ type: "text", text: "slept" }] };
  }
  if (name === "big-image") {
    const data = Buffer.alloc(600_000, 7).toString("base64");
    return { content: [{ type: "text", text: "a big one:" }, { type: "image", mimeType: "image/png", data }] };
  }
  if (name === "sleeping" || name === "cancelled") {
    return { content: [{ type: "text", text: String(name === "sleeping" ? sleeping : cancelled) }] };
  }
  if (name === "grow") {
    const grown = `grown-${tools.filter((t) => t.name.startsWith("grown-")).length + 1}`;
    tools.push(tool(grown, `A tool added by grow`, true));
    await server.sendToolListChanged();
    return { content: [{ type: "text", text: `added ${grown}` }] };
  }
  if (!tools.some((t) => t.name === name)) {
    return { isError: true, content: [{ type: "text", text: `no tool ${name}` }] };
  }
  return { content: [{ type: "text", text: `${name} answers` }] };
});

server.connect(new StdioServerTransport());

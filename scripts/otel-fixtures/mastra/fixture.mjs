// Records Mastra's own AI tracing spans, exported through @mastra/otel-exporter
// as OTLP/HTTP protobuf, for runlens' OTLP ingest tests. No network: the
// agent's model is a scripted AI SDK v5 language model (LanguageModelV2, the
// same object `MockLanguageModelV2` from `ai/test` builds; `ai/test` itself is
// not importable outside a test runner in ai 5.0.x, see NOTES.md). Run under
// recorder.py, which sets OTLP_RECORDER_ENDPOINT.
//
// One agent run (`agent.generate`): model call 1 returns a get_weather tool
// call (finish reason tool-calls), Mastra runs the tool, model call 2 returns
// the final text (finish reason stop). One trace.
//
// Mastra's OtelExporter wraps the official OTLP/proto exporter in a
// BatchSpanProcessor; the official Node OTLP/HTTP exporter sends its body with
// `Transfer-Encoding: chunked` (no Content-Length), which recorder.py (it reads
// Content-Length bytes) would store as empty files. So the exporter talks to a
// tiny in-process relay that buffers each request and forwards the identical
// bytes, with a Content-Length, to the recorder, one request at a time in
// arrival order (same relay as ../vercel-ai/fixture.mjs).
import http from 'node:http';
import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core/mastra';
import { createTool } from '@mastra/core/tools';
import { OtelExporter } from '@mastra/otel-exporter';
// Loaded up front so that OtelExporter's own lazy `import()` of it (on the
// first ended span) resolves from the module cache.
import '@opentelemetry/exporter-trace-otlp-proto';
import { simulateReadableStream } from 'ai';
import { z } from 'zod';

const endpoint = process.env.OTLP_RECORDER_ENDPOINT;
if (!endpoint) {
  console.error('OTLP_RECORDER_ENDPOINT is not set; run me under scripts/otel-fixtures/recorder.py');
  process.exit(2);
}

// --- de-chunking relay -------------------------------------------------------
let forwarded = 0;
let chain = Promise.resolve();
const relay = http.createServer((req, res) => {
  const parts = [];
  req.on('data', (c) => parts.push(c));
  req.on('end', () => {
    const body = Buffer.concat(parts);
    const headers = { 'Content-Type': req.headers['content-type'], 'Content-Length': body.length };
    if (req.headers['content-encoding']) headers['Content-Encoding'] = req.headers['content-encoding'];
    chain = chain.then(
      () =>
        new Promise((done) => {
          const up = http.request(`${endpoint}${req.url}`, { method: 'POST', headers }, (upRes) => {
            const back = [];
            upRes.on('data', (c) => back.push(c));
            upRes.on('end', () => {
              forwarded += 1;
              res.writeHead(upRes.statusCode, {
                'Content-Type': upRes.headers['content-type'] ?? 'application/x-protobuf',
                Connection: 'close',
              });
              res.end(Buffer.concat(back));
              done();
            });
          });
          up.on('error', (err) => {
            console.error(`relay: forwarding failed: ${err}`);
            res.writeHead(502, { Connection: 'close' });
            res.end();
            done();
          });
          up.end(body);
        }),
    );
  });
});
await new Promise((ok) => relay.listen(0, '127.0.0.1', ok));
const relayUrl = `http://127.0.0.1:${relay.address().port}`;

// --- scripted model ------------------------------------------------------------
// One scripted answer per model call, in order. Mastra 0.24's agent.generate()
// calls doGenerate; doStream serves the same answers as stream parts in case a
// code path (agent.stream()) uses it.
const turns = [
  {
    id: 'chatcmpl-mastra-001',
    content: [
      {
        type: 'tool-call',
        toolCallId: 'call_mastra_1',
        toolName: 'get_weather',
        input: JSON.stringify({ city: 'Paris' }),
      },
    ],
    finishReason: 'tool-calls',
    usage: { inputTokens: 12, outputTokens: 7, totalTokens: 19 },
  },
  {
    id: 'chatcmpl-mastra-002',
    content: [{ type: 'text', text: 'It is sunny in Paris.' }],
    finishReason: 'stop',
    usage: { inputTokens: 31, outputTokens: 9, totalTokens: 40 },
  },
];
const responseModelId = 'gpt-4o-mini-2024-07-18';
const responseTimestamp = new Date('2026-01-01T00:00:00Z');
let calls = 0;
const nextTurn = (how) => {
  const turn = turns[calls];
  calls += 1;
  if (!turn) throw new Error(`mock model: unexpected call ${calls} (${how})`);
  console.error(`mock model: call ${calls} via ${how}`);
  return turn;
};

// A LanguageModelV2 (AI SDK 5 provider spec), shaped like ai/test's
// MockLanguageModelV2: specificationVersion, provider, modelId, supportedUrls,
// doGenerate, doStream.
const model = {
  specificationVersion: 'v2',
  provider: 'openai.chat',
  modelId: 'gpt-4o-mini',
  supportedUrls: {},
  doGenerate: async () => {
    const t = nextTurn('doGenerate');
    return {
      content: t.content,
      finishReason: t.finishReason,
      usage: t.usage,
      response: { id: t.id, modelId: responseModelId, timestamp: responseTimestamp },
      warnings: [],
    };
  },
  doStream: async () => {
    const t = nextTurn('doStream');
    const chunks = [
      { type: 'stream-start', warnings: [] },
      { type: 'response-metadata', id: t.id, modelId: responseModelId, timestamp: responseTimestamp },
    ];
    for (const part of t.content) {
      if (part.type === 'text') {
        chunks.push({ type: 'text-start', id: 'txt-0' });
        chunks.push({ type: 'text-delta', id: 'txt-0', delta: part.text });
        chunks.push({ type: 'text-end', id: 'txt-0' });
      } else {
        chunks.push(part);
      }
    }
    chunks.push({ type: 'finish', finishReason: t.finishReason, usage: t.usage });
    return { stream: simulateReadableStream({ chunks }) };
  },
};

// --- agent -------------------------------------------------------------------------
const getWeather = createTool({
  id: 'get_weather',
  description: 'Get the current weather for a city.',
  inputSchema: z.object({ city: z.string().describe('City name') }),
  execute: async ({ context }) => ({ city: context.city, forecast: 'sunny', temperature_c: 21 }),
});

const weatherAgent = new Agent({
  name: 'weather-agent',
  instructions: 'You are a weather assistant.',
  model,
  tools: { get_weather: getWeather },
});

const mastra = new Mastra({
  agents: { weatherAgent },
  logger: false,
  // The deprecated OTel "telemetry" path is switched off; AI tracing
  // ("observability") is the current one.
  telemetry: { enabled: false },
  observability: {
    configs: {
      otel: {
        serviceName: 'mastra-fixture',
        exporters: [
          new OtelExporter({
            provider: {
              custom: { endpoint: `${relayUrl}/v1/traces`, protocol: 'http/protobuf' },
            },
          }),
        ],
      },
    },
  },
});

const agent = mastra.getAgent('weatherAgent');
// memory.thread / memory.resource name the conversation and the end user; with
// no Memory configured Mastra only records them (span metadata `threadId`,
// `resourceId`) and stores nothing.
const result = await agent.generate('What is the weather in Paris?', {
  memory: { thread: 'session-42', resource: 'user-7' },
});
console.error(
  `generate: ${JSON.stringify(result.text)}, steps=${result.steps?.length}, ` +
    `usage=${JSON.stringify(result.usage)}, traceId=${result.traceId}`,
);

// Mastra hands ended spans to its exporters fire-and-forget, and OtelExporter
// creates its OTLP exporter and BatchSpanProcessor lazily, with a dynamic
// import, on the first ended span. Calling mastra.shutdown() right after
// generate() therefore finds no processor yet (nothing is sent, and the spans
// queued afterwards are lost at exit). So give those promises a moment first.
await new Promise((ok) => setTimeout(ok, 1000));
// mastra.shutdown() shuts the tracing registry down, which shuts the exporter's
// BatchSpanProcessor down (a final flush of every queued span).
await mastra.shutdown();
await chain;
relay.closeAllConnections();
await new Promise((ok) => relay.close(ok));
console.error(`relay: forwarded ${forwarded} request(s)`);

// Records the Vercel AI SDK's own OpenTelemetry spans (`ai.*`) for runlens'
// OTLP ingest tests. No network: the model is the SDK's MockLanguageModelV3
// (from `ai/test`) with scripted answers. Run under recorder.py, which sets
// OTLP_RECORDER_ENDPOINT. See ../README.md ("vercel-ai fixture").
//
// 1. generateText with a get_weather tool: model call 1 returns a tool call
//    (finish reason tool-calls), the tool runs, model call 2 returns the final
//    text (finish reason stop). One trace.
// 2. streamText with a scripted text stream, consumed fully. A second trace.
//
// The official Node OTLP/HTTP exporter always sends its body with
// `Transfer-Encoding: chunked` (it pipes a Readable into the request, no
// Content-Length), which recorder.py (it reads Content-Length bytes) would
// store as empty files. So the exporter talks to a tiny in-process relay that
// buffers each request and forwards the identical bytes, with a
// Content-Length, to the recorder, one request at a time in arrival order.
import http from 'node:http';
import { diag, DiagConsoleLogger, DiagLogLevel } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { generateText, simulateReadableStream, stepCountIs, streamText, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';

const endpoint = process.env.OTLP_RECORDER_ENDPOINT;
if (!endpoint) {
  console.error('OTLP_RECORDER_ENDPOINT is not set; run me under scripts/otel-fixtures/recorder.py');
  process.exit(2);
}

diag.setLogger(new DiagConsoleLogger(), DiagLogLevel.WARN);

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

// One HTTP POST per span, sent when the span ends (children before parents).
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'vercel-ai-fixture' }),
  spanProcessors: [
    new SimpleSpanProcessor(
      new OTLPTraceExporter({ url: `${relayUrl}/v1/traces`, compression: 'none' }),
    ),
  ],
});
// Global registration: the AI SDK uses trace.getTracer('ai') when telemetry is enabled.
provider.register();

const usage = (input, output) => ({
  inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: output, text: output, reasoning: undefined },
});

const model = new MockLanguageModelV3({
  provider: 'openai.chat',
  modelId: 'gpt-4o-mini',
  // generateText: one scripted result per model call, in order.
  doGenerate: [
    {
      content: [
        {
          type: 'tool-call',
          toolCallId: 'call_wx_1',
          toolName: 'get_weather',
          input: JSON.stringify({ city: 'Paris' }),
        },
      ],
      finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
      usage: usage(12, 7),
      response: { id: 'chatcmpl-vercel-001', modelId: 'gpt-4o-mini-2024-07-18' },
      warnings: [],
    },
    {
      content: [{ type: 'text', text: 'It is sunny in Paris.' }],
      finishReason: { unified: 'stop', raw: 'stop' },
      usage: usage(31, 9),
      response: { id: 'chatcmpl-vercel-002', modelId: 'gpt-4o-mini-2024-07-18' },
      warnings: [],
    },
  ],
  // streamText: scripted stream parts.
  doStream: () => ({
    stream: simulateReadableStream({
      chunks: [
        { type: 'stream-start', warnings: [] },
        {
          type: 'response-metadata',
          id: 'chatcmpl-vercel-003',
          modelId: 'gpt-4o-mini-2024-07-18',
        },
        { type: 'text-start', id: 'txt-0' },
        { type: 'text-delta', id: 'txt-0', delta: 'Sunny, ' },
        { type: 'text-delta', id: 'txt-0', delta: '21 °C ' },
        { type: 'text-delta', id: 'txt-0', delta: 'in Paris.' },
        { type: 'text-end', id: 'txt-0' },
        {
          type: 'finish',
          finishReason: { unified: 'stop', raw: 'stop' },
          usage: usage(20, 6),
        },
      ],
    }),
  }),
});

const getWeather = tool({
  description: 'Get the current weather for a city.',
  inputSchema: z.object({ city: z.string().describe('City name') }),
  execute: async ({ city }) => ({ city, forecast: 'sunny', temperature_c: 21 }),
});

const gen = await generateText({
  model,
  tools: { get_weather: getWeather },
  stopWhen: stepCountIs(5),
  system: 'You are a weather assistant.',
  prompt: 'What is the weather in Paris?',
  temperature: 0.2,
  experimental_telemetry: {
    isEnabled: true,
    functionId: 'weather-agent',
    metadata: { sessionId: 'session-42', userId: 'user-7' },
  },
});
console.error(`generateText: ${JSON.stringify(gen.text)}, steps=${gen.steps.length}, usage=${JSON.stringify(gen.totalUsage)}`);

const stream = streamText({
  model,
  system: 'You are a weather assistant.',
  prompt: 'Summarise the Paris forecast in one line.',
  experimental_telemetry: {
    isEnabled: true,
    functionId: 'weather-summary',
    metadata: { sessionId: 'session-42', userId: 'user-7' },
  },
});
let streamed = '';
for await (const delta of stream.textStream) streamed += delta;
console.error(`streamText: ${JSON.stringify(streamed)}, usage=${JSON.stringify(await stream.totalUsage)}`);

await provider.forceFlush();
await provider.shutdown();
await chain;
relay.closeAllConnections();
await new Promise((ok) => relay.close(ok));
console.error(`relay: forwarded ${forwarded} request(s)`);

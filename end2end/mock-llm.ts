// A scripted OpenAI-compatible model server for the end-to-end tests: the
// test server's config names it as the provider `mock` (models `mock/small`
// and `mock/large`, see playwright.config.ts), so a comparison across
// several models runs without any network. It answers every Chat
// Completions request (not streamed) with a short text that names the model,
// after a short pause so a page can be seen filling in live.
import http from 'node:http';

/** The answer `model` gives to `prompt`. */
export function mockAnswer(model: string, prompt: string): string {
  return `${model} read ${prompt.split(/\s+/).filter(Boolean).length} words and answers: ${
    model.includes('large') ? 'a longer and more careful answer' : 'a short answer'
  }.`;
}

/** Starts the server on 127.0.0.1:`port`; resolves with a function that stops it. */
export function startMockLlm(port: number): Promise<() => Promise<void>> {
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
      if (body.length > 4_000_000) req.destroy();
    });
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'not found' } }));
        return;
      }
      let model = 'unknown';
      let prompt = '';
      try {
        const parsed = JSON.parse(body);
        model = String(parsed.model ?? 'unknown');
        const users = (parsed.messages ?? []).filter((m: { role: string }) => m.role === 'user');
        const last = users[users.length - 1]?.content;
        prompt = typeof last === 'string' ? last : JSON.stringify(last ?? '');
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'body is not JSON' } }));
        return;
      }
      const content = mockAnswer(model, prompt);
      const answer = {
        id: `chatcmpl-${Date.now()}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model,
        choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 12 + prompt.length, completion_tokens: content.length, total_tokens: 12 + prompt.length + content.length },
      };
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(answer));
      }, model.includes('large') ? 1_500 : 300);
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () =>
      resolve(() => new Promise<void>((done) => server.close(() => done()))),
    );
  });
}

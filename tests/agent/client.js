// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
// An application instrumented with the OpenTelemetry JS SDK: its HTTP
// instrumentation starts a CLIENT span per request and injects its W3C
// traceparent. Makes N GET requests to URL (CONCURRENCY at a time) and
// prints each CLIENT span as a JSON line: {traceId, spanId, path, status}.
//   node client.js URL N [CONCURRENCY]
'use strict';
const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const { SimpleSpanProcessor, InMemorySpanExporter } = require('@opentelemetry/sdk-trace-base');
const { registerInstrumentations } = require('@opentelemetry/instrumentation');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
const { SpanKind } = require('@opentelemetry/api');

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
provider.register();
registerInstrumentations({ instrumentations: [new HttpInstrumentation()] });
const http = require('http'); // after the instrumentation, which patches it

const [url, nArg, concArg] = process.argv.slice(2);
const n = Number(nArg || 10), conc = Number(concArg || 1);
const agent = new http.Agent({ keepAlive: true, maxSockets: conc });

function get(i) {
  return new Promise((resolve) => {
    const u = new URL(url.replace('{i}', String(i)));
    const req = http.get(u, { agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', (e) => resolve(`error ${e.message}`));
  });
}

async function main() {
  let next = 0;
  const workers = [];
  for (let w = 0; w < conc; w++) {
    workers.push((async () => {
      while (next < n) await get(next++);
    })());
  }
  await Promise.all(workers);
  await provider.forceFlush();
  for (const s of exporter.getFinishedSpans()) {
    if (s.kind !== SpanKind.CLIENT) continue;
    const ctx = s.spanContext();
    console.log(JSON.stringify({
      traceId: ctx.traceId,
      spanId: ctx.spanId,
      path: s.attributes['http.target'] || s.attributes['url.path'],
      status: s.attributes['http.status_code'] || s.attributes['http.response.status_code'],
    }));
  }
  agent.destroy();
}
main();

// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
// An OTLP/HTTP trace receiver that decodes with the OpenTelemetry JS
// packages' own generated protobuf code (not critpath's). Each span goes to
// OUT as a JSON line: ids in hex, times in ns (strings), attributes and
// resource attributes flattened. It answers 503 with Retry-After: 1 for
// REFUSE seconds from the first export (an agent slow to start still meets
// them); STATS gets {requests, refused, accepted, spans, bad} at SIGTERM.
//   node receiver.js PORT OUT STATS [REFUSE]
'use strict';
const fs = require('fs');
const http = require('http');
const zlib = require('zlib');
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root');
const pb = require('protobufjs/minimal');

// proto3 strings must be UTF-8, and the OpenTelemetry Collector (Go's
// protobuf) refuses a batch with one that is not; protobufjs would read it
// as U+FFFD. Strict, as the collector is: such a batch is answered 400.
const strict = new TextDecoder('utf-8', { fatal: true });
for (const R of [pb.Reader, pb.BufferReader]) {
  R.prototype.string = function strictString() {
    const bytes = this.bytes();
    return strict.decode(bytes);
  };
}

const Req = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const Resp = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;
const [port, out, statsPath, refuseArg] = process.argv.slice(2);
const refuseMs = 1000 * Number(refuseArg || 0);
let refuseUntil = null; // from the first POST /v1/traces
const stats = { requests: 0, refused: 0, accepted: 0, spans: 0, bad: 0, gzip: 0 };
const sink = fs.createWriteStream(out, { flags: 'a' });

const hex = (b64) => Buffer.from(b64 || '', 'base64').toString('hex');
function value(v) {
  if (!v) return null;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue) return (v.arrayValue.values || []).map(value);
  return null;
}
function flat(attrs) {
  const o = {};
  for (const kv of attrs || []) o[kv.key] = value(kv.value);
  return o;
}

http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    stats.requests++;
    if (req.method !== 'POST' || req.url !== '/v1/traces') {
      res.writeHead(404).end();
      return;
    }
    if (refuseUntil === null) refuseUntil = Date.now() + refuseMs;
    if (Date.now() < refuseUntil) {
      stats.refused++;
      res.writeHead(503, { 'Retry-After': '1' }).end();
      return;
    }
    let body = Buffer.concat(chunks);
    try {
      if ((req.headers['content-encoding'] || '') === 'gzip') {
        body = zlib.gunzipSync(body);
        stats.gzip++;
      }
      if (req.headers['content-type'] !== 'application/x-protobuf') throw new Error('content type');
      const m = Req.toObject(Req.decode(body), { longs: String, bytes: String, enums: Number });
      for (const rs of m.resourceSpans || []) {
        const resource = flat(rs.resource && rs.resource.attributes);
        for (const ss of rs.scopeSpans || []) {
          for (const s of ss.spans || []) {
            stats.spans++;
            sink.write(JSON.stringify({
              traceId: hex(s.traceId), spanId: hex(s.spanId),
              parentSpanId: hex(s.parentSpanId), traceState: s.traceState || '',
              name: s.name, kind: s.kind,
              start: s.startTimeUnixNano, end: s.endTimeUnixNano,
              status: s.status ? s.status.code || 0 : 0,
              attributes: flat(s.attributes), resource,
              scope: ss.scope ? ss.scope.name : '',
            }) + '\n');
          }
        }
      }
      stats.accepted++;
      res.writeHead(200, { 'Content-Type': 'application/x-protobuf' });
      res.end(Buffer.from(Resp.encode(Resp.create({})).finish()));
    } catch (e) {
      stats.bad++;
      res.writeHead(400).end(String(e));
    }
  });
}).listen(Number(port), '127.0.0.1', () => console.log('READY'));

process.on('SIGTERM', () => {
  sink.end(() => {
    fs.writeFileSync(statsPath, JSON.stringify(stats));
    process.exit(0);
  });
});

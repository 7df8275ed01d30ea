#!/usr/bin/env node
// A client generated from the OpenAPI document that a running sluiced serves, talking to it.
//
//   node generated_client.js BASE_URL ADMIN_TOKEN
//
// openapi-client-axios (npm, pinned in package.json) fetches BASE_URL/openapi.json and builds
// one method per operationId from it; nothing here knows a path, a method or a header name
// that the document does not give. Every operation of the document is called at least once,
// and every answer's status and media type must be one the document lists for that
// operation. tests/integration/openapi_client_test.cpp starts sluiced with the config this
// expects (policies api, web, jobs; a rule on /app; envoy_rls domain edge) and runs it.
// Prints "ok: ..." and exits 0 when every assertion held; exits 1 with the failure otherwise.
'use strict';

const assert = require('node:assert/strict');
const { OpenAPIClientAxios } = require('openapi-client-axios');

const [base, token] = process.argv.slice(2);
if (!base || !token) {
  console.error('usage: generated_client.js BASE_URL ADMIN_TOKEN');
  process.exit(2);
}

const methods = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const called = new Set();
const problemJson = 'application/problem+json';

// Each answer must be one the document describes: its status (or the NXX range) and, when
// there is a body, its media type.
function assertDocumented(operation, res) {
  const where = `${operation.operationId} -> ${res.status}`;
  const s = String(res.status);
  const documented = operation.responses[s] ?? operation.responses[`${s[0]}XX`];
  assert.ok(documented, `${where}: status not in the document (${Object.keys(operation.responses)})`);
  const media = String(res.headers['content-type'] ?? '').split(';')[0].trim();
  const hasBody = res.data !== undefined && res.data !== '';
  if (!documented.content) {
    assert.ok(!hasBody, `${where}: a body the document does not describe`);
  } else if (hasBody) {
    assert.ok(media in documented.content,
              `${where}: media type '${media}' not in ${Object.keys(documented.content)}`);
  }
}

const api = new OpenAPIClientAxios({
  definition: `${base}/openapi.json`,
  // The document's server is sluiced's default listen address; this one is on a test port.
  withServer: { url: base },
  // Every status is an answer to assert on, not an exception; no proxy for loopback.
  axiosConfigDefaults: { validateStatus: () => true, proxy: false, timeout: 10000 },
  transformOperationMethod: (method, operation) => async (...args) => {
    const res = await method(...args);
    called.add(operation.operationId);
    assertDocumented(operation, res);
    return res;
  },
});

const admin = { headers: { Authorization: `Bearer ${token}` } };

function assertProblem(res, status, error) {
  assert.equal(res.status, status, JSON.stringify(res.data));
  assert.ok(String(res.headers['content-type']).startsWith(problemJson));
  assert.equal(res.data.status, status);
  if (error) assert.equal(res.data.error, error, JSON.stringify(res.data));
}

function retryAfter(res) {
  const v = res.headers['retry-after'];
  assert.match(String(v), /^[0-9]+$/, `Retry-After: ${v}`);
  return Number(v);
}

async function decisions(c) {
  // check spends: remaining falls by the cost; peek spends nothing.
  const body = { key: 'user:42', policy: 'api' };
  let res = await c.peek(null, body);
  assert.equal(res.status, 200);
  assert.deepEqual({ ...res.data, reset_after_ms: 0 }, {
    allowed: true, degraded: false, limit: 3, policy: 'api', remaining: 3, reset_after_ms: 0,
    retry_after_ms: 0,
  });
  assert.equal((await c.peek(null, body)).data.remaining, 3);
  res = await c.check(null, body);
  assert.equal(res.status, 200);
  assert.equal(res.data.allowed, true);
  assert.equal(res.data.limit, 3);
  assert.equal(res.data.remaining, 2);
  assert.equal(res.headers['x-ratelimit-remaining'], '2');
  res = await c.check(null, { ...body, cost: 2 });
  assert.equal(res.data.allowed, true);
  assert.equal(res.data.remaining, 0);
  res = await c.peek(null, body);
  assert.equal(res.data.allowed, false);
  assert.equal(res.data.remaining, 0);
  // Denied is still 200 (the check was made), with Retry-After and allowed false.
  res = await c.check(null, body);
  assert.equal(res.status, 200);
  assert.equal(res.data.allowed, false);
  assert.equal(res.data.degraded, false);
  assert.ok(res.data.retry_after_ms > 0, JSON.stringify(res.data));
  assert.equal(retryAfter(res), Math.ceil(res.data.retry_after_ms / 1000));
  // Another key has its own bucket.
  res = await c.check(null, { key: 'user:43', policy: 'api' });
  assert.equal(res.data.allowed, true);
  assert.equal(res.data.remaining, 2);

  // Bad requests: problem+json with a stable error code.
  assertProblem(await c.check(null, { key: 'user:42', policy: 'api', extra: 1 }), 400,
                'invalid_request');
  assertProblem(await c.check(null, { key: 'user:42', policy: 'nope' }), 422, 'unknown_policy');
  assertProblem(await c.peek(null, { key: 'user:42', policy: 'api', cost: 99 }), 422,
                'cost_out_of_range');
  assertProblem(await c.check(null, { key: '', policy: 'api' }), 422, 'invalid_key');
}

async function adminOperations(c) {
  const body = { key: 'user:42', policy: 'api' };
  // Without the token: 401 with WWW-Authenticate; with a wrong one: 403; nothing changes.
  let res = await c.reset(null, body);
  assertProblem(res, 401);
  assert.equal(res.headers['www-authenticate'], 'Bearer');
  assertProblem(await c.refund(null, { ...body, cost: 1 },
                               { headers: { Authorization: 'Bearer wrong' } }), 403);
  assert.equal((await c.peek(null, body)).data.remaining, 0);

  res = await c.reset(null, body, admin);
  assert.equal(res.status, 200);
  assert.equal(res.data.allowed, true);
  assert.equal(res.data.remaining, 3);  // a new key: what a check of 1 would see, unspent
  assert.equal((await c.check(null, body)).data.remaining, 2);
  res = await c.penalize(null, { ...body, cost: 2 }, admin);
  assert.equal(res.status, 200);
  assert.equal(res.data.allowed, false);
  assert.equal(res.data.remaining, 0);
  res = await c.refund(null, { ...body, cost: 3 }, admin);
  assert.equal(res.status, 200);
  assert.equal(res.data.allowed, true);
  assert.equal(res.data.remaining, 3);
  res = await c.block(null, { ...body, duration_ms: 60000 }, admin);
  assert.equal(res.status, 200);
  assert.equal(res.data.allowed, false);
  assert.ok(res.data.retry_after_ms > 55000 && res.data.retry_after_ms <= 60000,
            JSON.stringify(res.data));
  res = await c.check(null, body);
  assert.equal(res.data.allowed, false);
  assert.ok(retryAfter(res) > 55, res.headers['retry-after']);
  assertProblem(await c.block(null, { ...body, duration_ms: 0 }, admin), 422,
                'duration_out_of_range');
  assertProblem(await c.refund(null, body, admin), 400, 'invalid_request');  // no cost
}

async function concurrency(c) {
  const key = { key: 'export:7', policy: 'jobs' };
  let res = await c.acquire(null, key);
  assert.equal(res.status, 200);
  assert.equal(res.data.acquired, true);
  assert.equal(res.data.in_flight, 1);
  assert.equal(res.data.limit, 1);
  assert.match(res.data.slot, /^[0-9a-f]{32}$/i);
  const slot = { ...key, slot: res.data.slot };
  // The limit is 1: a second caller is refused with 429 and Retry-After.
  res = await c.acquire(null, key);
  assert.equal(res.status, 429);
  assert.equal(res.data.acquired, false);
  assert.equal(res.data.in_flight, 1);
  assert.ok(res.data.retry_after_ms > 0 && res.data.retry_after_ms <= 30000);
  assert.equal(retryAfter(res), Math.ceil(res.data.retry_after_ms / 1000));
  res = await c.renew(null, slot);
  assert.equal(res.status, 200);
  assert.equal(res.data.renewed, true);
  assert.ok(res.data.expires_in_ms > 25000 && res.data.expires_in_ms <= 30000);
  res = await c.release(null, slot);
  assert.equal(res.status, 200);
  assert.equal(res.data.released, true);
  assert.equal(res.data.in_flight, 0);
  assertProblem(await c.release(null, slot), 404, 'slot_not_held');
  assertProblem(await c.renew(null, slot), 404, 'slot_not_held');
  assertProblem(await c.release(null, { ...key, slot: 'nope' }), 422, 'invalid_slot');
  assertProblem(await c.acquire(null, { key: 'export:7', policy: 'api' }), 400, 'rate_policy');
  // Freed: it can be taken again.
  res = await c.acquire(null, key);
  assert.equal(res.status, 200);
  assert.equal(res.data.in_flight, 1);
}

async function forwardAuth(c) {
  // The rule 'site' limits /app per client address (web: capacity 2); the test's peer is a
  // trusted proxy, so X-Forwarded-For names the client. Every method on both paths, each as
  // a new client: allowed with one token left.
  const ops = Object.keys(api.definition.paths['/v1/auth'])
    .filter((m) => methods.includes(m)).map((m) => api.definition.paths['/v1/auth'][m]);
  const pathOps = Object.keys(api.definition.paths['/v1/auth/{original_path}'])
    .filter((m) => methods.includes(m))
    .map((m) => api.definition.paths['/v1/auth/{original_path}'][m]);
  assert.ok(ops.length >= 2 && pathOps.length >= 2);
  let n = 0;
  for (const op of ops) {
    const res = await c[op.operationId]({ 'X-Forwarded-For': `192.0.2.${++n}`,
                                          'X-Forwarded-Uri': '/app/report' });
    assert.equal(res.status, 200, op.operationId);
    assert.equal(res.headers['x-ratelimit-limit'], '2', op.operationId);
    assert.equal(res.headers['x-ratelimit-remaining'], '1', op.operationId);
  }
  for (const op of pathOps) {
    const res = await c[op.operationId]({ original_path: 'app',
                                          'X-Forwarded-For': `192.0.2.${++n}` });
    assert.equal(res.status, 200, op.operationId);
    assert.equal(res.headers['x-ratelimit-remaining'], '1', op.operationId);
  }
  // One client until denied: 429, Retry-After, a quota-exceeded problem.
  const client = { 'X-Forwarded-For': '198.51.100.9', 'X-Forwarded-Uri': '/app' };
  assert.equal((await c.auth_get(client)).headers['x-ratelimit-remaining'], '1');
  assert.equal((await c.auth_post(client)).headers['x-ratelimit-remaining'], '0');
  const denied = await c.auth_get(client);
  assert.equal(denied.status, 429);
  assert.equal(denied.headers['x-ratelimit-remaining'], '0');
  assert.ok(retryAfter(denied) > 0);
  assert.ok(String(denied.headers['content-type']).startsWith(problemJson));
  assert.equal(denied.data.status, 429);
  assert.equal(denied.data.type, 'https://iana.org/assignments/http-problem-types#quota-exceeded');
  // Another client and a path no rule matches are still let through.
  assert.equal((await c.auth_get({ ...client, 'X-Forwarded-For': '198.51.100.10' })).status, 200);
  const free = await c.auth_path_get({ original_path: 'public', 'X-Forwarded-For': '198.51.100.9' });
  assert.equal(free.status, 200);
  assert.equal(free.headers['x-ratelimit-remaining'], undefined);
  return { allowed: n + 3, denied: 1 };
}

async function envoyJson(c) {
  const req = { domain: 'edge', descriptors: [{ entries: [{ key: 'tenant', value: 't1' }] }] };
  let res = await c.should_rate_limit_json(null, req);
  assert.equal(res.status, 200);
  assert.equal(res.data.overallCode, 'OK');
  assert.equal(res.data.statuses[0].code, 'OK');
  assert.equal(res.data.statuses[0].currentLimit.requestsPerUnit, 2);
  assert.equal(res.data.statuses[0].limitRemaining, 1);
  res = await c.should_rate_limit_json(null, req);
  assert.equal(res.data.statuses[0].code, 'OK');
  // The proto's JSON mapping leaves out a zero.
  assert.equal(res.data.statuses[0].limitRemaining ?? 0, 0);
  res = await c.should_rate_limit_json(null, req);
  assert.equal(res.status, 429);
  assert.equal(res.data.overallCode, 'OVER_LIMIT');
  assert.equal(res.data.statuses[0].code, 'OVER_LIMIT');
  assertProblem(await c.should_rate_limit_json(null, { domain: 'edge', nope: 1 }), 400,
                'invalid_request');
}

async function operations(c, authCounts) {
  let res = await c.healthz();
  assert.equal(res.status, 200);
  assert.deepEqual(res.data, { status: 'ok' });
  res = await c.readyz();
  assert.equal(res.status, 200);
  assert.deepEqual(res.data, { status: 'ready', backend: 'up' });
  // The document again, through its own operation: the one this client was built from.
  res = await c.openapi();
  assert.equal(res.status, 200);
  assert.equal(res.data.openapi, '3.1.0');
  assert.deepEqual(Object.keys(res.data.paths), Object.keys(api.definition.paths));
  // Metrics count what this client did.
  res = await c.metrics();
  assert.equal(res.status, 200);
  assert.equal(typeof res.data, 'string');
  const sample = (series) => {
    const line = res.data.split('\n').find((l) => l.startsWith(`${series} `));
    assert.ok(line, `no ${series} in /metrics`);
    return Number(line.slice(series.length + 1));
  };
  assert.equal(sample('sluice_http_requests_total{code="200",endpoint="check"}'), 6);
  assert.equal(sample('sluice_http_requests_total{code="401",endpoint="reset"}'), 1);
  assert.equal(sample('sluice_admin_requests_total{endpoint="block",outcome="ok"}'), 1);
  const auth = 'sluice_decisions_total{endpoint="auth",policy="web",result=';
  assert.equal(sample(`${auth}"allowed",rule="site"}`), authCounts.allowed);
  assert.equal(sample(`${auth}"denied",rule="site"}`), authCounts.denied);
}

async function main() {
  const c = await api.init();
  // The client the document generates: a method for every operation, named by its operationId.
  const ids = [];
  for (const [path, item] of Object.entries(api.definition.paths)) {
    for (const m of methods.filter((k) => k in item)) {
      const id = item[m].operationId;
      assert.ok(id, `${m.toUpperCase()} ${path} has no operationId: a client cannot name it`);
      assert.equal(typeof c[id], 'function', id);
      ids.push(id);
    }
  }
  assert.equal(new Set(ids).size, ids.length, 'operationIds are not unique');

  await decisions(c);
  await adminOperations(c);
  await concurrency(c);
  const authCounts = await forwardAuth(c);
  await envoyJson(c);
  await operations(c, authCounts);

  const missed = ids.filter((id) => !called.has(id));
  assert.deepEqual(missed, [], `operations never called: ${missed}`);
  console.log(`ok: ${ids.length} operations of ${base}/openapi.json called through the generated client`);
}

main().catch((e) => {
  // An assertion's stack names the line; anything else (a refused connection) its message.
  console.error(e instanceof assert.AssertionError ? e.stack : `error: ${e.message ?? e}`);
  process.exit(1);
});

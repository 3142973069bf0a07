// A real Express app with stock OpenTelemetry instrumentation (http, express, pg), for tests/test_otel.py.
// node _otel_app.js PORT DAEMON_URL PG_PORT; the exporter is configured only by the standard OTEL_*
// variables (endpoint, headers, protocol through OTEL_TEST_PROTOCOL=json|proto, batch delay);
// OTEL_TEST_NO_DB=1 leaves the database uninstrumented; OTEL_TEST_OFF=1 starts no tracing at all, and
// without the PG_PORT argument only the routes that need no database answer (bench/otel.py).
// Packages come from tests/.otel/node_modules (tests/bootstrap.sh), found through NODE_PATH.
//
//   POST /api/save      inserts one row into `profile` (autocommit)
//   POST /api/noop      answers {ok: true} and writes nothing
//   POST /api/rollback  inserts inside BEGIN ... ROLLBACK and answers {ok: true}
//   POST /api/swallow   a middleware throws; the app's error handler answers 200 {ok: true}
//   POST /api/logged    logs an ERROR record (OTLP logs) and answers 200 {ok: true}
//   POST /api/boom      throws: Express answers 500
//   GET  /form          a server-rendered form: a plain HTML post, then 303 (its "forged" button replaces
//                       the mark cookie by a trace id no tab was issued as the page leaves)
//   POST /form/save     inserts one row, 303 to /form?saved=1
//   POST /form/noop     writes nothing, 303 to /form?saved=1
'use strict';
const { NodeSDK } = require('@opentelemetry/sdk-node');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
const { ExpressInstrumentation } = require('@opentelemetry/instrumentation-express');
const { PgInstrumentation } = require('@opentelemetry/instrumentation-pg');
const { OTLPLogExporter } = require('@opentelemetry/exporter-logs-otlp-http');
const { SimpleLogRecordProcessor } = require('@opentelemetry/sdk-logs');
const { logs } = require('@opentelemetry/api-logs');
const Exporter =
  process.env.OTEL_TEST_PROTOCOL === 'proto'
    ? require('@opentelemetry/exporter-trace-otlp-proto').OTLPTraceExporter
    : require('@opentelemetry/exporter-trace-otlp-http').OTLPTraceExporter;

// OTEL_TEST_REGISTER=1: tracing is already on, from NODE_OPTIONS=--require
// @opentelemetry/auto-instrumentations-node/register (what `reticle init` prints), configured by env only
const sdk = process.env.OTEL_TEST_REGISTER || process.env.OTEL_TEST_OFF ? null : new NodeSDK({
  traceExporter: new Exporter(),
  logRecordProcessors: [new SimpleLogRecordProcessor(new OTLPLogExporter())],
  instrumentations: [new HttpInstrumentation(), new ExpressInstrumentation()].concat(
    process.env.OTEL_TEST_NO_DB ? [] : [new PgInstrumentation()]
  )
});
if (sdk) sdk.start();

const express = require('express');
const { Pool } = require('pg');

const [port, daemon, pgPort] = process.argv.slice(2);
const pool = new Pool({ host: '127.0.0.1', port: Number(pgPort), user: 'app', database: 'postgres' });
const PAGE = `<!doctype html><html><head><title>Profile</title>
<script src="${daemon}/reticle.js"></script></head><body>
<h1>Profile</h1>
<button onclick="go('/api/save')">Save</button>
<button onclick="go('/api/noop')">Save (no-op)</button>
<button onclick="go('/api/rollback')">Save (rollback)</button>
<button onclick="go('/api/swallow')">Save (swallowed)</button>
<button onclick="go('/api/logged')">Save (logged)</button>
<button onclick="go('/api/boom')">Save (boom)</button>
<button onclick="goXhr('/api/save')">Save (xhr)</button>
<button onclick="goOwn('/api/save')">Save (own trace)</button>
<p id="out"></p>
<script>
function done(path) { document.getElementById('out').textContent = 'Saved profile ' + path; }
function go(path) {
  fetch(path, {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"name":"ada"}'})
    .then(function (r) { return r.text(); }).then(function () { done(path); });
}
function goOwn(path) {
  fetch(path, {method: 'POST', headers: {'Content-Type': 'application/json',
    traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'}, body: '{"name":"ada"}'})
    .then(function (r) { return r.text(); }).then(function () { done(path + ' (own)'); });
}
function goXhr(path) {
  var xhr = new XMLHttpRequest();
  xhr.open('POST', path);
  xhr.setRequestHeader('Content-Type', 'application/json');
  xhr.onload = function () { done(path + ' (xhr)'); };
  xhr.send('{"name":"ada"}');
}
</script></body></html>`;

const FORM = (saved) => `<!doctype html><html><head><title>Profile form</title>
<script src="${daemon}/reticle.js"></script></head><body>
<h1>Profile form</h1>
<p id="msg">${saved ? 'Saved profile' : ''}</p>
<form method="post" action="/form/save">
<label>Name <input name="name"></label>
<button>Add</button>
<button formaction="/form/noop">Add (no-op)</button>
<button onclick="window.addEventListener('beforeunload', forge)">Add (forged)</button>
</form>
<script>
// after the SDK marked the post (at its formdata event): the mark cookie replaced by a trace id of the page's own
function forge() { document.cookie = '__reticle_mark=4bf92f3577b34da6a3ce929d0e0e4736; path=/form/save'; }
</script></body></html>`;

function saveProfile(name) {
  return pool.query('INSERT INTO profile (name) VALUES ($1)', [name]);
}

function loadProfileStore() {
  throw new Error('profile store unavailable');
}

const app = express();
app.use(express.json());
app.use(express.urlencoded({ extended: false }));
app.get('/', (req, res) => res.type('html').send(PAGE));
app.get('/form', (req, res) => res.type('html').send(FORM(req.query.saved === '1')));
app.post('/form/save', async (req, res, next) => {
  try {
    await saveProfile(req.body.name || 'ada');
    res.redirect(303, '/form?saved=1');
  } catch (err) {
    next(err);
  }
});
app.post('/form/noop', (req, res) => res.redirect(303, '/form?saved=1'));
app.post('/api/save', async (req, res, next) => {
  try {
    await saveProfile(req.body.name || 'ada');
    res.json({ ok: true });
  } catch (err) {
    next(err);
  }
});
app.post('/api/noop', (req, res) => res.json({ ok: true }));
app.post('/api/logged', (req, res) => {
  // the app catches a failure, logs it at ERROR through OpenTelemetry's logs API, and answers 200
  logs.getLogger('shop.views').emit({ severityNumber: 17, severityText: 'ERROR', body: 'could not save profile' });
  res.json({ ok: true });
});
app.post('/api/rollback', async (req, res, next) => {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('INSERT INTO profile (name) VALUES ($1)', ['ada']);
    await client.query('ROLLBACK');
    res.json({ ok: true });
  } catch (err) {
    next(err);
  } finally {
    client.release();
  }
});
// a middleware (Express's instrumentation records the exceptions of middleware layers; it ends a route
// handler's span before the handler runs, so a route handler's own throw leaves no exception event)
app.use('/api/swallow', () => {
  loadProfileStore();
});
app.post('/api/boom', () => {
  loadProfileStore();
});
// the app's own error handler: the swallowed error answers 200, every other one 500
// eslint-disable-next-line no-unused-vars
app.use((err, req, res, next) => {
  const swallowed = req.originalUrl === '/api/swallow';
  res.status(swallowed ? 200 : 500).json({ ok: swallowed });
});

(pgPort ? pool.query('CREATE TABLE IF NOT EXISTS profile (id serial PRIMARY KEY, name text)') : Promise.resolve())
  .then(() => app.listen(Number(port), '127.0.0.1', () => console.log('listening on ' + port)))
  .catch((err) => {
    console.error(err);
    process.exit(1);
  });

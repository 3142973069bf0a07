// A real Express + TypeORM app on PostgreSQL with stock OpenTelemetry instrumentation (http, express, pg and
// @opentelemetry/instrumentation-typeorm), for tests/test_otel.py.  node _otel_typeorm_app.js PORT DAEMON_URL
// PG_PORT; the exporter is configured by the standard OTEL_* variables only.  OTEL_TEST_TYPEORM_ALONE=1 sets the
// TypeORM instrumentation's suppressInternalInstrumentation (its documented option): the driver's spans under
// an ORM operation are left out, so each save is one TypeORM span with no SQL under it.
// Packages come from tests/.otel/node_modules (tests/bootstrap.sh), found through NODE_PATH.
//
//   POST /contacts                    saves a new contact (TypeORM's save: INSERT), answers 201
//   POST /contacts/noop               answers 201 {ok: true} and saves nothing
//   POST /contacts/:id/rename         loads contact :id, renames it, saves it (UPDATE of row :id)
//   POST /contacts/:id/rename-wrong   renames the other seeded contact instead of :id, answers as if it had not
'use strict';
const { NodeSDK } = require('@opentelemetry/sdk-node');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
const { ExpressInstrumentation } = require('@opentelemetry/instrumentation-express');
const { PgInstrumentation } = require('@opentelemetry/instrumentation-pg');
const { TypeormInstrumentation } = require('@opentelemetry/instrumentation-typeorm');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http');

const sdk = new NodeSDK({
  traceExporter: new OTLPTraceExporter(),
  instrumentations: [
    new HttpInstrumentation(),
    new ExpressInstrumentation(),
    new PgInstrumentation(),
    new TypeormInstrumentation({ suppressInternalInstrumentation: !!process.env.OTEL_TEST_TYPEORM_ALONE })
  ]
});
sdk.start();

require('reflect-metadata');
const express = require('express');
const { DataSource, EntitySchema } = require('typeorm');

const [port, daemon, pgPort] = process.argv.slice(2);
const Contact = new EntitySchema({
  name: 'Contact',
  tableName: 'contact',
  columns: { id: { type: Number, primary: true, generated: true }, name: { type: String } }
});
const db = new DataSource({
  type: 'postgres', host: '127.0.0.1', port: Number(pgPort), username: 'app', database: 'postgres',
  entities: [Contact], synchronize: true
});
const contacts = () => db.getRepository(Contact);
const seeded = [];

const page = () => `<!doctype html><html><head><title>Contacts</title>
<script src="${daemon}/reticle.js"></script></head><body>
<h1>Contacts</h1>
<button onclick="send('/contacts')">Add contact</button>
<button onclick="send('/contacts/noop')">Add contact (no-op)</button>
<button onclick="send('/contacts/${seeded[0]}/rename')">Rename contact</button>
<button onclick="send('/contacts/${seeded[0]}/rename-wrong')">Rename contact (wrong row)</button>
<p id="out"></p>
<script>
function send(path) {
  var out = document.getElementById('out');
  out.textContent = '';
  fetch(path, {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify({name: 'ada'})})
    .then(function (r) { return r.text(); }).then(function () { out.textContent = 'Saved contact ' + path + '.'; });
}
</script></body></html>`;

async function rename(id, res, next) {
  try {
    const contact = await contacts().findOneBy({ id });
    contact.name = 'renamed ' + Date.now();  // a new name each time: an unchanged entity saves nothing
    await contacts().save(contact);
    res.json({ ok: true });
  } catch (err) {
    next(err);
  }
}

const app = express();
app.use(express.json());
app.get('/', (req, res) => res.type('html').send(page()));
app.post('/contacts', async (req, res, next) => {
  try {
    const saved = await contacts().save({ name: req.body.name || 'ada' });
    res.status(201).json({ id: saved.id });
  } catch (err) {
    next(err);
  }
});
app.post('/contacts/noop', (req, res) => res.status(201).json({ ok: true }));
app.post('/contacts/:id/rename', (req, res, next) => rename(Number(req.params.id), res, next));
app.post('/contacts/:id/rename-wrong', (req, res, next) => {
  // the bug: the neighbour is renamed, and the answer is the same as the right rename's
  const other = seeded.find((id) => id !== Number(req.params.id));
  rename(other, res, next);
});

db.initialize()
  .then(async () => {
    for (const name of ['ada', 'bob']) seeded.push((await contacts().save({ name })).id);
    app.listen(Number(port), '127.0.0.1', () => console.log('listening on ' + port + ', contacts ' + seeded.join(' ')));
  })
  .catch((err) => {
    console.error(err);
    process.exit(1);
  });

// the tracing packages and the database client stay plain Node modules (not bundled), so that the
// instrumentation patches the very `pg` the route handlers load
module.exports = {
  serverExternalPackages: ['pg', '@opentelemetry/sdk-node', '@opentelemetry/instrumentation-http',
    '@opentelemetry/instrumentation-pg', '@opentelemetry/exporter-trace-otlp-http']
};

// Next.js's instrumentation hook (what `reticle init` prints for Next.js), tracing the Node runtime only.
export async function register() {
  if (process.env.NEXT_RUNTIME === 'nodejs') {
    await import('./instrumentation.node.js');
  }
}

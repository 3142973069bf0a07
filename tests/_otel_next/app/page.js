'use client';
import { useEffect, useState } from 'react';

export default function Page() {
  const [out, setOut] = useState('');
  const [ready, setReady] = useState(false);
  useEffect(() => setReady(true), []); // hydrated: the buttons have their handlers
  const go = (path) =>
    fetch(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"name":"ada"}' })
      .then((r) => r.text())
      .then(() => setOut('Saved profile ' + path));
  return (
    <main>
      <h1>Profile</h1>
      <p id="state">{ready ? 'Hydrated' : 'Loading'}</p>
      <button onClick={() => go('/api/save')}>Save</button>
      <button onClick={() => go('/api/noop')}>Save (no-op)</button>
      <p id="out">{out}</p>
    </main>
  );
}

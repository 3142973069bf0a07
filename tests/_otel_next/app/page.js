'use client';
import { useState } from 'react';

export default function Page() {
  const [out, setOut] = useState('');
  const go = (path) =>
    fetch(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"name":"ada"}' })
      .then((r) => r.text())
      .then(() => setOut('Saved profile ' + path));
  return (
    <main>
      <h1>Profile</h1>
      <button onClick={() => go('/api/save')}>Save</button>
      <button onClick={() => go('/api/noop')}>Save (no-op)</button>
      <p id="out">{out}</p>
    </main>
  );
}

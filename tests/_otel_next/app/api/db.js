import { Pool } from 'pg';

// one pool per server process (dev mode reloads modules)
export const pool =
  globalThis.__shopPool ||
  (globalThis.__shopPool = new Pool({ host: '127.0.0.1', port: Number(process.env.PG_PORT), user: 'app',
    database: 'postgres' }));

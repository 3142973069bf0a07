import { pool } from '../db';

export async function POST() {
  await pool.query('INSERT INTO profile (name) VALUES ($1)', ['ada']);
  return Response.json({ ok: true });
}

import pg from "pg";

// PostgreSQL through pg (the instrumentation-pg spans); the table is made by the test before the server starts.
export const pool = new pg.Pool({ host: "127.0.0.1", port: Number(process.env.PG_PORT), user: "app", database: "postgres" });

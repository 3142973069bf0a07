import { Form, useActionData } from "react-router";
import { pool } from "../db.server";

// Save inserts a note; "Save (no-op)" answers the same "Saved" and writes nothing; "Save (rollback)" inserts
// in a transaction it rolls back, and answers "Saved" too.
export async function action({ request }: { request: Request }) {
  const form = await request.formData();
  const intent = String(form.get("intent"));
  const title = String(form.get("title") || "");
  if (intent === "save") {
    await pool.query("INSERT INTO notes (title) VALUES ($1)", [title]);
  } else if (intent === "rollback") {
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("INSERT INTO notes (title) VALUES ($1)", [title]);
      await client.query("ROLLBACK");
    } finally {
      client.release();
    }
  }
  return { saved: "Saved " + intent + " " + Date.now() };
}

export default function Notes() {
  const data = useActionData() as { saved?: string } | undefined;
  return (
    <main>
      <h1>Notes</h1>
      <Form method="post">
        <label>Title <input name="title" defaultValue="milk" /></label>
        <button type="submit" name="intent" value="save">Save</button>
        <button type="submit" name="intent" value="noop">Save (no-op)</button>
        <button type="submit" name="intent" value="rollback">Save (rollback)</button>
      </Form>
      <p role="status">{data?.saved}</p>
    </main>
  );
}

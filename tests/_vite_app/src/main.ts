// A React page without JSX (no plugin): a form whose save fails, a message a component renders.
import { createElement as h, useState } from "react";
import { createRoot } from "react-dom/client";
import { saveProfile, reportFailure } from "./lib/api";

function SaveStatus(props: { failed: boolean }) {
  return props.failed ? h("p", { role: "alert" }, "Could not save your profile") : null;
}

function ProfileForm() {
  const [failed, setFailed] = useState(false);
  async function onSave(): Promise<void> {
    const ok: boolean = await saveProfile({ name: "Ada" });
    if (!ok) {
      reportFailure("the server refused it");
      setFailed(true);
    }
  }
  function onCrash(): void {
    throw new Error("profile widget crashed");
  }
  return h("div", null,
    h("button", { id: "save", onClick: onSave }, "Save"),
    h("button", { id: "crash", onClick: onCrash }, "Crash"),
    h(SaveStatus, { failed }));
}

createRoot(document.getElementById("root")!).render(h(ProfileForm));

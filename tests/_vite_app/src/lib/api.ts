// The app's client for its API: the request a failed save makes is sent from here.
export interface Profile {
  name: string;
}

export async function saveProfile(profile: Profile): Promise<boolean> {
  const body: string = JSON.stringify(profile);
  const res: Response = await fetch("/api/save", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body,
  });
  return res.ok;
}

export function reportFailure(what: string): void {
  console.error("profile save failed: " + what);
}

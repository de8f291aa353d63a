// Talking to the viewer's server: JSON pages only (GET; the viewer changes nothing).

export async function get(path, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") query.set(key, value);
  }
  const text = query.toString();
  const response = await fetch("/api/" + path + (text ? "?" + text : ""), {headers: {Accept: "application/json"}});
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

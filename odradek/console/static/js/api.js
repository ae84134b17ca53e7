// The console's JSON API (app.py): GET for pages, POST/DELETE for changes.
// A failed call throws an ApiError carrying Kafka's error name and message.

export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? `${body.error}: ${body.message}` : `HTTP ${status}`);
    this.status = status;
    this.code = body ? body.error : null;
  }
}

async function call(method, path, body) {
  const init = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  // Against the page's origin, which never holds a user name and password: a page opened as
  // http://user:password@host/ has them in its own URL, and fetch refuses a URL made from it.
  // The browser sends the login it holds for the origin (HTTP Basic, console_auth.py) either way.
  const response = await fetch(new URL(path, window.location.origin), init);
  const text = await response.text();
  let parsed = null;
  try { parsed = text ? JSON.parse(text) : null; } catch (e) { parsed = null; }
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
}

export const getJSON = (path) => call("GET", path);
export const postJSON = (path, body) => call("POST", path, body);
export const deleteJSON = (path) => call("DELETE", path);

// A path segment for a topic or group name (group ids may hold any character).
export const seg = (name) => encodeURIComponent(name);

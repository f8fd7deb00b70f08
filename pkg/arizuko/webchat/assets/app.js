// The arizuko web chat: plain JS, no outside assets. The token lives in
// sessionStorage and travels as a bearer header; the event stream is read
// with fetch so it can carry the header too.
"use strict";
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("arizuko-token") || "";
let stream = null;

async function api(method, path, body) {
  const opts = { method, headers: { Authorization: "Bearer " + token } };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  const data = resp.status === 204 ? null : await resp.json().catch(() => null);
  if (!resp.ok) {
    const err = new Error((data && data.message) || resp.statusText);
    err.status = resp.status;
    err.code = data && data.error;
    throw err;
  }
  return data;
}

function notice(text) {
  $("notice").textContent = text;
  $("notice").hidden = !text;
}

function showMessage(m) {
  const li = document.createElement("li");
  li.className = m.direction === "out" ? "out" : "in";
  li.dataset.id = m.id;
  const who = document.createElement("span");
  who.className = "who";
  who.textContent = m.direction === "out" ? (m.folder || "agent") : (m.sender || "you");
  li.append(who, document.createTextNode(m.text));
  $("log").append(li);
  $("log").scrollTop = $("log").scrollHeight;
}

async function follow(folder) {
  if (stream) stream.abort();
  stream = new AbortController();
  const signal = stream.signal;
  $("log").replaceChildren();
  $("typing").hidden = true;
  notice("");
  while (!signal.aborted) {
    try {
      const resp = await fetch("/v1/webchat/events?folder=" + encodeURIComponent(folder),
        { headers: { Authorization: "Bearer " + token }, signal });
      if (!resp.ok) {
        const data = await resp.json().catch(() => ({}));
        notice("cannot follow " + folder + ": " + (data.message || resp.statusText));
        return;
      }
      const reader = resp.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      $("log").replaceChildren();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const chunk = buf.slice(0, i);
          buf = buf.slice(i + 2);
          for (const line of chunk.split("\n")) {
            if (line.startsWith("data: ")) handle(JSON.parse(line.slice(6)), folder);
          }
        }
      }
    } catch (e) {
      if (signal.aborted) return;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

function handle(ev, folder) {
  if (ev.message) {
    showMessage(ev.message);
    if (ev.message.direction === "out") $("typing").hidden = true;
  }
  if (ev.typing !== undefined) {
    $("typing").textContent = folder + " is typing…";
    $("typing").hidden = !ev.typing;
  }
  if (ev.notice) notice(ev.notice);
}

async function login() {
  $("login-error").textContent = "";
  let folders;
  try {
    folders = await api("GET", "/v1/webchat/folders");
  } catch (e) {
    $("login-error").textContent = e.status === 401 ? "That token is unknown or revoked." : "Login failed: " + e.message;
    sessionStorage.removeItem("arizuko-token");
    return;
  }
  sessionStorage.setItem("arizuko-token", token);
  $("login-form").hidden = true;
  $("chat").hidden = false;
  $("logout").hidden = false;
  const sel = $("folder");
  sel.replaceChildren();
  for (const f of folders) {
    const o = document.createElement("option");
    o.value = f.path;
    o.textContent = f.display_name ? f.display_name + " (" + f.path + ")" : f.path;
    sel.append(o);
  }
  if (folders.length === 0) {
    notice("This token may not message any folder.");
    return;
  }
  follow(sel.value);
}

$("login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  token = $("token").value.trim();
  login();
});
$("logout").addEventListener("click", () => {
  sessionStorage.removeItem("arizuko-token");
  location.reload();
});
$("folder").addEventListener("change", () => follow($("folder").value));
$("send-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = $("text").value;
  if (!text.trim()) return;
  notice("");
  try {
    const ing = await api("POST", "/v1/webchat/messages", { folder: $("folder").value, text });
    $("text").value = "";
    if (ing.route && ing.route.how === "unrouted") notice("Not delivered: " + ing.route.reason);
  } catch (e) {
    notice((e.status === 403 ? "Denied: " : "Not sent: ") + e.message);
  }
});
if (token) login();

// The page's behaviour: choose a table, ask, follow up, start over. Every call goes to the JSON
// endpoints of tapas_tf/inference/web_app.py; the server renders the marked table (the same
// rendering as `python -m tapas_tf.ask --html`), and this script only places it.
"use strict";

let sessionId = null;  // The server keeps the table and the conversation under this id.

const byId = (id) => document.getElementById(id);

/** Calls an endpoint; resolves to its JSON, or rejects with the server's sentence. */
async function call(url, options) {
  let response;
  try {
    response = await fetch(url, options);
  } catch (error) {
    throw new Error(`The server cannot be reached (${error.message}). Is python -m tapas_tf.serve running?`);
  }
  let data;
  try {
    data = await response.json();
  } catch (error) {
    throw new Error(`The server answered ${response.status} ${response.statusText} without an explanation.`);
  }
  if (!response.ok) {
    throw new Error(data.error || `The server answered ${response.status}.`);
  }
  return data;
}

function postJSON(url, body) {
  return call(url, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
}

function showError(message) {
  const box = byId("error");
  box.textContent = message ? `Error: ${message}` : "";
  box.hidden = !message;
}

function setBusy(busy) {
  document.body.classList.toggle("busy", busy);
  byId("busy").hidden = !busy;
  for (const id of ["ask", "new-conversation", "load-example", "file"]) {
    byId(id).disabled = busy;
  }
}

function fillList(list, items) {
  list.replaceChildren(...items.map((text) => {
    const item = document.createElement("li");
    item.textContent = text;
    return item;
  }));
}

/** Shows a table view (`web_sessions.table_view`): its name, size, notes and cells. */
function showTable(view) {
  sessionId = view.session;
  byId("table-name").textContent = view.name;
  byId("table-info").textContent = `${view.name}: ${view.rows.toLocaleString()} rows, ` +
    `${view.columns.toLocaleString()} columns`;
  fillList(byId("table-notes"), view.notes);
  byId("table").innerHTML = view.table_html;  // Rendered and escaped by the server.
  byId("conversation-panel").hidden = false;
  byId("table-panel").hidden = false;
}

function paragraph(className, text) {
  const element = document.createElement("p");
  element.className = className;
  element.textContent = text;
  return element;
}

/** Appends one answer (`web_sessions.answer_view`) to the visible conversation. */
function addAnswer(view, roundTripMs) {
  const item = document.createElement("li");
  item.dataset.turn = view.turn;
  item.dataset.serverMs = view.elapsed_ms;
  item.dataset.roundTripMs = roundTripMs.toFixed(1);
  const notes = document.createElement("ul");
  notes.className = "notes";
  fillList(notes, view.diagnostics);
  item.append(
    paragraph("question", `Q: ${view.question}`),
    paragraph("answer", `A: ${view.summary}`),
    paragraph("operator", view.operator_line),
    notes,
    paragraph("timing", `answered in ${Math.round(roundTripMs)} ms (model ${Math.round(view.elapsed_ms)} ms)`),
  );
  byId("conversation").append(item);
}

async function loadTable(request) {
  showError("");
  setBusy(true);
  try {
    const view = await request();
    byId("conversation").replaceChildren();
    showTable(view);
    byId("question").focus();
  } catch (error) {
    showError(error.message);
  } finally {
    setBusy(false);
  }
}

async function ask(event) {
  event.preventDefault();
  showError("");
  if (!sessionId) {
    showError("Choose a table first: upload a CSV file or load an example table.");
    return;
  }
  setBusy(true);
  const started = performance.now();
  try {
    const view = await postJSON("/api/ask", {session: sessionId, question: byId("question").value});
    addAnswer(view, performance.now() - started);
    byId("table").innerHTML = view.table_html;
    byId("question").value = "";
  } catch (error) {
    showError(error.message);
  } finally {
    setBusy(false);
    byId("question").focus();
  }
}

async function newConversation() {
  if (!sessionId) {
    return;
  }
  await loadTable(() => postJSON("/api/reset", {session: sessionId}));
}

function uploadChosenFile() {
  const input = byId("file");
  const file = input.files[0];
  if (!file) {
    return;
  }
  input.value = "";  // Choosing the same file again is a new upload.
  loadTable(() => call(`/api/table?name=${encodeURIComponent(file.name)}`,
                       {method: "POST", headers: {"Content-Type": "text/csv"}, body: file}));
}

async function start() {
  byId("file").addEventListener("change", uploadChosenFile);
  byId("load-example").addEventListener("click",
    () => loadTable(() => postJSON("/api/example", {name: byId("example").value})));
  byId("ask-form").addEventListener("submit", ask);
  byId("new-conversation").addEventListener("click", newConversation);
  try {
    const info = await call("/api/info");
    byId("model").textContent = `model: ${info.model || "(unnamed)"}; a cell is selected above p = ${info.threshold}`;
    byId("example").replaceChildren(...info.examples.map((name) => new Option(name, name)));
  } catch (error) {
    showError(error.message);
  }
  document.body.dataset.ready = "true";  // Browser tests wait for this.
}

start();

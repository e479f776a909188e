// The page's behaviour: choose a table, ask, follow up, start over. Every call goes to the JSON
// endpoints of tapas_tf/serving/web_app.py; the server renders the marked table (the same
// rendering as `python -m tapas_tf.ask --html`) and words the answer (`web_sessions.answer_view`);
// this script places them, numbers the table's rows and keeps the latest answer in view.
// A session may hold a collection of tables (the server's, or files uploaded together): then each
// answer names the table it comes from, and the table shown is that one.
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
  for (const id of ["ask", "new-conversation", "load-example", "file", "mode", "open-collection"]) {
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

/** Puts a server-rendered table in its box, with each body row's number (0-based, as the ask API
 * and `python -m tapas_tf.ask` count rows) in a first column that stays in view. */
function placeTable(tableHtml) {
  const box = byId("table");
  box.innerHTML = tableHtml;  // Rendered and escaped by the server.
  const table = box.querySelector("table");
  if (!table) {
    return;
  }
  const corner = document.createElement("th");
  corner.className = "row-number";
  corner.scope = "col";
  corner.textContent = "#";
  corner.title = "Row number (the first row is 0)";
  table.querySelector("thead tr")?.prepend(corner);
  for (const row of table.querySelectorAll("tbody tr")) {
    const number = document.createElement("th");
    number.className = "row-number";
    number.scope = "row";
    number.textContent = row.querySelector("td[data-row]")?.dataset.row ?? "";
    row.prepend(number);
  }
}

/** Scrolls the table's box (not the page) so that the first highlighted cell shows. */
function revealSelected() {
  const box = byId("table");
  const cell = box.querySelector("td.selected");
  if (!cell) {
    return;
  }
  const boxTop = box.getBoundingClientRect().top + (box.querySelector("thead")?.offsetHeight ?? 0);
  const cellRect = cell.getBoundingClientRect();
  if (cellRect.top < boxTop || cellRect.bottom > box.getBoundingClientRect().bottom) {
    box.scrollTop += cellRect.top - boxTop - cellRect.height;
  }
}

/** Adds notes about the table that it does not show yet: each is said once per table. */
function addTableNotes(notes) {
  const list = byId("table-notes");
  const shown = new Set(Array.from(list.children, (item) => item.textContent));
  for (const note of notes) {
    if (!shown.has(note)) {
      const item = document.createElement("li");
      item.textContent = note;
      list.append(item);
      shown.add(note);
    }
  }
}

function plural(count, word) {
  return `${count.toLocaleString()} ${count === 1 ? word : `${word}s`}`;
}

/** "Collection my_tables: 3 tables from /data/my_tables" (`CollectionInfo.to_dict`). */
function collectionLine(collection) {
  const tables = plural(collection.tables, "table");
  const line = collection.uploaded ? `${collection.name}: ${tables}`
                                   : `Collection ${collection.name}: ${tables} from ${collection.source}`;
  return collection.skipped ? `${line} (${plural(collection.skipped, "file")} not read)` : line;
}

/** The files of a collection that could not be read, each with its reason. */
function skippedLines(collection) {
  const lines = collection.skipped_files.map((file) =>
    `Not read: ${file.reason.startsWith(file.name) ? file.reason : `${file.name}: ${file.reason}`}`);
  const more = collection.skipped - collection.skipped_files.length;
  return more > 0 ? [...lines, `… and ${plural(more, "more file")} not read.`] : lines;
}

/** The line above the table: its name and size, or in a collection the table that answered. */
function tableInfo(view) {
  const size = `${view.rows.toLocaleString()} rows, ${view.columns.toLocaleString()} columns`;
  if (!view.collection) {
    return `${view.name}: ${size}`;
  }
  return view.table_id ? `From table ${view.table_title} (${view.table_id}): ${size}` : "";
}

/** Shows a table view (`web_sessions.table_view`): its name, size, notes and cells; for a
 * collection, what it holds, and before its first answer what the first question does. */
function showTable(view) {
  sessionId = view.session;
  const collection = view.collection;
  byId("table-name").textContent = !collection || collection.uploaded ? view.name : `the collection ${view.name}`;
  byId("table-info").textContent = tableInfo(view);
  byId("collection-line").textContent = collection ? collectionLine(collection) : "";
  byId("collection-line").hidden = !collection;
  fillList(byId("skipped-files"), collection ? skippedLines(collection) : []);
  byId("collection-hint").textContent = collection ? `Ask a question: the model reads the ` +
    `${plural(Math.min(collection.k, collection.tables), "table")} that match it best and answers from the ` +
    "best one, which then shows here. Follow-up questions stay with that table until a new conversation." : "";
  byId("collection-hint").hidden = !collection || Boolean(view.table_html);
  fillList(byId("table-notes"), view.notes);
  placeTable(view.table_html);
  byId("table").scrollTop = 0;
  byId("welcome").hidden = true;
  byId("conversation-panel").hidden = false;
  byId("table-panel").hidden = false;
}

function paragraph(className, text) {
  const element = document.createElement("p");
  element.className = className;
  element.textContent = text;
  element.hidden = !text;
  return element;
}

/** The other tables a collection's first answer read, each with its answer and scores. */
function runnersUp(view) {
  const box = document.createElement("div");
  box.className = "runners-up";
  const tables = view.runners_up || [];
  box.hidden = !tables.length;
  const list = document.createElement("ul");
  fillList(list, tables.map((table) => {
    const name = `${table.title} (${table.table_id})`;
    if (table.error) {
      return `${name}: not asked: ${table.error}`;
    }
    const answer = table.answer ? `"${table.answer}"` : "no answer";
    const confidence = table.confidence === null ? "" : `, confidence ${table.confidence.toFixed(2)}`;
    return `${name}: ${answer}, retrieval score ${table.retrieval_score.toFixed(2)}${confidence}`;
  }));
  box.append(paragraph("runners-up-title", `Other tables read (${tables.length}):`), list);
  return box;
}

function formatMs(ms) {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** Appends one answer (`web_sessions.answer_view`) to the visible conversation, in plain words:
 * the answer, how an aggregation got its value, the notes that matter to it, who answered, and
 * the rest folded under "Details". */
function addAnswer(view, roundTripMs) {
  const item = document.createElement("li");
  item.dataset.turn = view.turn;
  item.dataset.serverMs = view.elapsed_ms;
  item.dataset.roundTripMs = roundTripMs.toFixed(1);
  const notes = document.createElement("ul");
  notes.className = "notes";
  fillList(notes, view.answer_notes);
  item.append(
    paragraph("question", `Q: ${view.question}`),
    paragraph("answer", `A: ${view.answer_line}`),
    paragraph("from-table", view.table_line || ""),
    paragraph("operator", view.working),
    notes,
    runnersUp(view),
    paragraph("timing", `${view.answered_by} in ${formatMs(roundTripMs)}`),
    detailsFolded(view, "answer", roundTripMs),
  );
  appendLatest(item);
}

/** The "Details" fold of an answer or a verdict: the server's details, then the times. */
function detailsFolded(view, what, roundTripMs) {
  const details = document.createElement("details");
  const summary = document.createElement("summary");
  summary.textContent = "Details";
  const detailList = document.createElement("ul");
  fillList(detailList, [...view.details, `The model took ${formatMs(view.elapsed_ms)}; the ${what} reached ` +
    `this page after ${formatMs(roundTripMs)}.`]);
  details.append(summary, detailList);
  return details;
}

/** Adds an item to the conversation as its latest, and keeps it in view. */
function appendLatest(item) {
  const conversation = byId("conversation");
  conversation.querySelector("li.latest")?.classList.remove("latest");
  item.classList.add("latest");
  conversation.append(item);
  conversation.scrollTop = conversation.scrollHeight;  // The latest answer stays in view ...
  item.scrollIntoView({block: "nearest"});                // ... also when the panels stack.
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

/** Appends a verdict on a statement (`web_sessions.verdict_view`) to the visible conversation. */
function addVerdict(view, roundTripMs) {
  const item = document.createElement("li");
  item.className = `verdict ${view.entailed ? "entailed" : "refuted"}`;
  item.dataset.probability = view.probability;
  item.append(paragraph("question", `Statement: ${view.statement}`), paragraph("answer", view.verdict_line),
              detailsFolded(view, "verdict", roundTripMs));
  appendLatest(item);
}

async function verify() {
  setBusy(true);
  const started = performance.now();
  try {
    const view = await postJSON("/api/verify", {session: sessionId, statement: byId("question").value});
    addVerdict(view, performance.now() - started);
    byId("question").value = "";
  } catch (error) {
    showError(error.message);
  } finally {
    setBusy(false);
    byId("question").focus();
  }
}

/** Ask or check, as the mode selector says; the placeholder and the button follow it. */
function modeChanged() {
  const checking = byId("mode").value === "verify";
  byId("question").placeholder = checking ? "Write a statement about the table to check"
                                          : "Ask a question about the table";
  byId("question").setAttribute("aria-label", checking ? "Your statement" : "Your question");
  byId("ask").textContent = checking ? "Check" : "Ask";
  byId("verify-hint").hidden = !checking;
}

async function ask(event) {
  event.preventDefault();
  showError("");
  if (!sessionId) {
    showError("Choose a table first: upload a CSV file or load an example table.");
    return;
  }
  if (byId("mode").value === "verify") {
    await verify();
    return;
  }
  setBusy(true);
  const started = performance.now();
  try {
    const view = await postJSON("/api/ask", {session: sessionId, question: byId("question").value});
    if (view.collection) {  // The answering table, which the first answer of a conversation chooses.
      byId("table-info").textContent = tableInfo(view);
      byId("collection-hint").hidden = true;
    }
    placeTable(view.table_html);
    addTableNotes([...view.notes, ...view.table_notes]);
    addAnswer(view, performance.now() - started);
    revealSelected();
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

/** Several files at once: one request, the files one after the other, their names and sizes in
 * the query (`web_collections.upload_request`); the server indexes them as a collection. */
function uploadCollection(files) {
  const query = new URLSearchParams();
  for (const file of files) {
    query.append("name", file.name);
    query.append("size", String(file.size));
  }
  loadTable(() => call(`/api/collection/upload?${query}`,
                       {method: "POST", headers: {"Content-Type": "application/octet-stream"},
                        body: new Blob(files)}));
}

function uploadChosenFile() {
  const input = byId("file");
  const files = Array.from(input.files);
  if (!files.length) {
    return;
  }
  input.value = "";  // Choosing the same file again is a new upload.
  if (files.length > 1) {
    uploadCollection(files);
    return;
  }
  const [file] = files;
  loadTable(() => call(`/api/table?name=${encodeURIComponent(file.name)}`,
                       {method: "POST", headers: {"Content-Type": "text/csv"}, body: file}));
}

function openCollection() {
  return loadTable(() => postJSON("/api/collection", {}));
}

async function start() {
  byId("file").addEventListener("change", uploadChosenFile);
  byId("load-example").addEventListener("click",
    () => loadTable(() => postJSON("/api/example", {name: byId("example").value})));
  byId("ask-form").addEventListener("submit", ask);
  byId("new-conversation").addEventListener("click", newConversation);
  byId("mode").addEventListener("change", modeChanged);
  byId("open-collection").addEventListener("click", openCollection);
  let collection = null;
  try {
    const info = await call("/api/info");
    const model = byId("model");
    const who = info.model ? `${info.model}, a TAPAS model` : "a TAPAS model";
    model.textContent = `Questions are answered by ${who} that reads the table and highlights the cells ` +
      "of the answer." + (info.aggregation_model ? ` A first question that asks to count, add up or ` +
      `average ("how many", "total") goes to ${info.aggregation_model}, which computes the value.` : "");
    model.title = `A cell is highlighted when the model's probability for it is above ${info.threshold}.`;
    byId("example").replaceChildren(...info.examples.map((name) => new Option(name, name)));
    byId("mode").hidden = !info.fact_checker;  // "Check a statement" only with a TabFact model.
    if (info.fact_checker) {
      model.textContent += ` Statements are checked by ${info.fact_checker}, a TabFact model.`;
    }
    collection = info.collection;
    byId("open-collection").hidden = !collection;
    byId("collection-info").hidden = !collection;
    if (collection) {
      byId("collection-info").textContent = `Collection mode: ${plural(collection.tables, "table")} from ` +
        `${collection.source}. Each answer says which table it comes from.`;
    }
  } catch (error) {
    showError(error.message);
  }
  if (collection) {  // Collection mode: ready to ask at once.
    await openCollection();
  }
  document.body.dataset.ready = "true";  // Browser tests wait for this.
}

start();

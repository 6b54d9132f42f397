// Aptix console: progressive enhancement only. Every page reads without
// JavaScript except /console/live. Everything a turn carries is put into
// the page with textContent, never innerHTML.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // A turn still in flight reloads until it completes.
  const inFlight = document.getElementById("in-flight");
  if (inFlight) {
    const s = Number(inFlight.dataset.refresh || "2");
    setTimeout(() => location.reload(), s * 1000);
  }
  if (document.body.dataset.page === "live") live();
});

function live() {
  const tbody = document.querySelector("#live tbody");
  const tmpl = document.getElementById("live-row");
  // The event stages in order, as the server put them in the row template
  // (layout.EventStages): the page and the script cannot disagree.
  const stages = Array.from(tmpl.content.querySelectorAll("td.cell"), (td) => td.dataset.stage);
  const status = document.getElementById("live-status");
  const rows = new Map();
  const es = new EventSource("/console/live/events");
  es.onopen = () => { status.textContent = "following every stage (newest first)"; };
  es.onerror = () => { status.textContent = "disconnected; retrying…"; };
  es.addEventListener("stage", (e) => {
    let ev;
    try { ev = JSON.parse(e.data); } catch { return; }
    const key = ev.conversation + "/" + ev.turn;
    let row = rows.get(key);
    if (!row) {
      row = tmpl.content.firstElementChild.cloneNode(true);
      row.dataset.turn = ev.turn;
      const a = row.querySelector("a.turn");
      a.href = "/console/turns/" + encodeURIComponent(ev.turn) + "?c=" + encodeURIComponent(ev.conversation);
      a.querySelector("code").textContent = ev.turn;
      row.querySelector(".conv").textContent = ev.conversation;
      row.querySelector("button.watch").addEventListener("click", () => watch(ev.conversation, ev.turn));
      rows.set(key, row);
      tbody.prepend(row);
      while (tbody.rows.length > 200) {
        const last = tbody.rows[tbody.rows.length - 1];
        rows.delete(last.querySelector(".conv").textContent + "/" + last.dataset.turn);
        last.remove();
      }
    }
    const at = stages.indexOf(ev.stage);
    row.querySelectorAll("td.cell").forEach((td) => {
      const i = stages.indexOf(td.dataset.stage);
      td.classList.toggle("here", i === at);
      td.classList.toggle("past", at >= 0 && i < at);
      if (i === at) td.textContent = (ev.time || "").slice(11, 23);
      // A turn that entered past a stage (no retrieval: it skipped the
      // retriever and its queue) never shows a time there.
      if (ev.skipped && i < at && !td.textContent) { td.classList.add("skipped"); td.textContent = "skipped"; }
    });
    if (ev.stage === stages[stages.length - 1]) row.classList.add("done");
  });
}

let textSource = null;
function watch(conversation, turn) {
  const box = document.getElementById("stream");
  const out = document.getElementById("stream-text");
  const st = document.getElementById("stream-status");
  box.hidden = false;
  document.getElementById("stream-turn").textContent = turn;
  out.textContent = "";
  st.textContent = "waiting for deltas…";
  if (textSource) textSource.close();
  textSource = new EventSource("/console/live/text?conversation=" + encodeURIComponent(conversation) + "&turn=" + encodeURIComponent(turn));
  textSource.addEventListener("delta", (e) => {
    let d;
    try { d = JSON.parse(e.data); } catch { return; }
    if (d.type === "text" && d.text) out.textContent += d.text;
    else if (d.type === "arguments" && d.text) out.textContent += d.text;
    st.textContent = "streaming…";
  });
  textSource.addEventListener("done", () => {
    st.textContent = "completed. ";
    const a = document.createElement("a");
    a.href = "/console/turns/" + encodeURIComponent(turn) + "?c=" + encodeURIComponent(conversation);
    a.textContent = "Open the turn";
    st.appendChild(a);
    textSource.close();
    textSource = null;
  });
}

// The request page's progress bar: while the workflow runs, poll the page's small JSON endpoint and update
// the bar, the numbers and the status in place; when the workflow stops, reload once to show the outcomes,
// the tombstones and the history. Without JavaScript the page shows the same numbers and refreshes itself.
(function () {
  "use strict";
  const box = document.getElementById("progress");
  if (!box || box.dataset.polling !== "1") return;
  const INTERVAL_MS = 1000;
  const status = document.getElementById("request-status");
  const bar = box.querySelector(".ledger-progress");

  function update(data) {
    for (const name of ["planned", "done", "deferred", "refused", "pending"]) {
      const cell = box.querySelector('[data-count="' + name + '"]');
      if (cell) cell.textContent = String(data[name]);
    }
    for (const [name, width] of Object.entries(data.bar)) {
      const seg = box.querySelector('[data-seg="' + name + '"]');
      if (seg) seg.style.width = width + "%";
    }
    if (bar) {
      bar.setAttribute("aria-valuemax", String(data.planned));
      bar.setAttribute("aria-valuenow", String(data.done));
    }
    if (status) {
      status.textContent = data.status_display;
      status.className = "ledger-badge status-" + data.status;
    }
  }

  async function poll() {
    try {
      const response = await fetch(box.dataset.url, {headers: {"Accept": "application/json"}, credentials: "same-origin"});
      if (response.ok) {
        const data = await response.json();
        update(data);
        if (!data.running) {
          window.location.reload();
          return;
        }
      }
    } catch (error) {
      // A dropped poll is retried on the next tick.
    }
    window.setTimeout(poll, INTERVAL_MS);
  }
  window.setTimeout(poll, INTERVAL_MS);
})();

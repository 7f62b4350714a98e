// The run page's lead (its outcome) and live part: fetch them again every few seconds and swap each in. When the run
// moves to another gate (or leaves one), reload the whole page so that the gate's answer forms match. Forms are never
// touched here.
"use strict";
const live = document.getElementById("live");
const EVERY_MS = 4000;

async function refresh() {
  try {
    const response = await fetch(`/runs/${encodeURIComponent(live.dataset.run)}/live`, {
      cache: "no-store",
      credentials: "same-origin",
    });
    if (response.status === 401) {
      window.location.assign("/login");
      return;
    }
    if (response.ok) {
      const gate = response.headers.get("X-Eyas-Gate") || "";
      if (gate !== live.dataset.gate) {
        window.location.reload();
        return;
      }
      const parts = document.createElement("template");
      parts.innerHTML = await response.text();
      for (const part of parts.content.querySelectorAll("[data-part]")) {
        const shown = document.getElementById(part.dataset.part);
        if (shown) {
          shown.innerHTML = part.innerHTML;
        }
      }
    }
  } catch (error) {
    // The dashboard restarted or the network blinked: try again at the next tick.
  }
  window.setTimeout(refresh, EVERY_MS);
}

if (live) {
  window.setTimeout(refresh, EVERY_MS);
}

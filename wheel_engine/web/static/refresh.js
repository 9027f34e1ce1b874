// Refreshes the overview's counts every 15 seconds from /api/overview. Optional: the page is
// complete without it (it is server-rendered), and it never inserts markup, only text.
(function () {
  "use strict";
  var root = document.querySelector("link[rel=stylesheet]").getAttribute("href").replace(/\/static\/style\.css$/, "");
  function pick(data, path) {
    return path.split(".").reduce(function (v, k) { return v == null ? v : v[k]; }, data);
  }
  function refresh() {
    fetch(root + "/api/overview", { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data) { return; }
        document.querySelectorAll("[data-count]").forEach(function (el) {
          var v = pick(data, el.getAttribute("data-count"));
          if (typeof v === "number") { el.textContent = String(v); }
        });
      })
      .catch(function () {});
  }
  setInterval(refresh, 15000);
})();

// Put into JupyterLite's pages by lite/build.py, before the app's own scripts.
//
// When the Python kernel (Pyodide, in a web worker) cannot start, jupyterlite-pyodide-kernel
// writes the reason into the kernel log and turns the kernel icon red: easy to miss, and the
// cells just wait ([*]). This script watches the kernel's worker and, if the worker fails to
// load or its first answer (to "initialize") is an error, shows the reason over the page.
(function () {
  "use strict";
  const NativeWorker = window.Worker;
  if (!NativeWorker) return;

  function show(reason) {
    if (document.getElementById("mha-kernel-failed")) return;
    const box = document.createElement("div");
    box.id = "mha-kernel-failed";
    box.setAttribute("role", "alert");
    box.style.cssText = "position:fixed;z-index:100000;left:0;right:0;top:0;padding:0.8em 1.2em;" +
      "background:#fdecea;color:#5f1410;border-bottom:4px solid #b3261e;font:16px/1.4 system-ui,sans-serif";
    const title = document.createElement("strong");
    title.textContent = "Python could not start here, so the code cells will not run. ";
    const why = document.createElement("span");
    why.textContent = "Reason: " + reason + ". Reload the page to try again. If it fails again, this " +
      "copy of the site is missing files, or the browser blocks what the kernel needs (a page " +
      "opened as a file, or a private window): tell whoever set it up.";
    const close = document.createElement("button");
    close.type = "button";
    close.textContent = "Close";
    close.style.cssText = "margin-left:1em;font:inherit";
    close.addEventListener("click", () => box.remove());
    box.append(title, why, close);
    document.body.append(box);
  }
  window.mhaKernelFailed = show;  // for a test, or another script

  class WatchedWorker extends NativeWorker {
    constructor(url, options) {
      super(url, options);
      let answered = false;
      this.addEventListener("error", (event) => show(event.message || "the kernel's worker did not load"));
      this.addEventListener("message", (event) => {
        const data = event.data;
        // comlink's replies carry an id and a type; the first one answers initialize().
        if (answered || !data || data.id === undefined || data.type === undefined) return;
        answered = true;
        if (data.type === "HANDLER" && data.name === "throw" && data.value && data.value.isError) {
          const error = data.value.value || {};
          show(String(error.message || error || "unknown error"));
        }
      });
    }
  }
  window.Worker = WatchedWorker;
})();
